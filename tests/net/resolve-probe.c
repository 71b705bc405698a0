/* SPDX-License-Identifier: MIT */
/* Name resolution for tests/net: resolves NAME (default localhost) with getaddrinfo,
 * gethostbyname, gethostbyname2, gethostbyname_r, gethostbyaddr and getnameinfo, and prints
 * what each returned.
 *
 * Usage: resolve-probe [NAME]
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

static void print_hostent(const char *what, const struct hostent *he)
{
    if (!he) {
        printf("%s: not found (h_errno %d)\n", what, h_errno);
        return;
    }
    printf("%s: name %s type %d length %d", what, he->h_name, he->h_addrtype, he->h_length);
    for (char **a = he->h_aliases; *a; a++)
        printf(" alias %s", *a);
    for (char **a = he->h_addr_list; *a; a++) {
        char t[INET6_ADDRSTRLEN];
        printf(" addr %s", inet_ntop(he->h_addrtype, *a, t, sizeof t));
    }
    printf("\n");
}

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "localhost";
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_CANONNAME }, *res;
    int r = getaddrinfo(name, "80", &hints, &res);
    if (r) {
        printf("getaddrinfo: %s\n", gai_strerror(r));
    } else {
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
            char h[NI_MAXHOST], s[NI_MAXSERV];
            getnameinfo(ai->ai_addr, ai->ai_addrlen, h, sizeof h, s, sizeof s,
                        NI_NUMERICHOST | NI_NUMERICSERV);
            printf("getaddrinfo: family %d socktype %d protocol %d addr %s port %s canon %s\n",
                   ai->ai_family, ai->ai_socktype, ai->ai_protocol, h, s,
                   ai->ai_canonname ? ai->ai_canonname : "-");
        }
        freeaddrinfo(res);
    }
    hints.ai_flags = AI_NUMERICHOST;
    r = getaddrinfo(name, NULL, &hints, &res);
    printf("getaddrinfo numeric: %s\n", r ? gai_strerror(r) : "found");
    if (!r)
        freeaddrinfo(res);
    print_hostent("gethostbyname", gethostbyname(name));
    print_hostent("gethostbyname2", gethostbyname2(name, AF_INET));
    struct hostent he, *hp = NULL;
    char buf[1024];
    int herr = 0;
    r = gethostbyname_r(name, &he, buf, sizeof buf, &hp, &herr);
    printf("gethostbyname_r: %d\n", r);
    print_hostent("gethostbyname_r", hp);
    struct in_addr lo;
    inet_pton(AF_INET, "127.0.0.1", &lo);
    print_hostent("gethostbyaddr", gethostbyaddr(&lo, sizeof lo, AF_INET));
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(80), .sin_addr = lo };
    char h[NI_MAXHOST], s[NI_MAXSERV];
    r = getnameinfo((struct sockaddr *)&sa, sizeof sa, h, sizeof h, s, sizeof s, 0);
    printf("getnameinfo: %d %s %s\n", r, r ? "-" : h, r ? "-" : s);
    return 0;
}
