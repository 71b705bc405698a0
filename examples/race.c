/* SPDX-License-Identifier: MIT */
/* race: an atomicity violation, the kind of bug that passes every test run you watch.
 *
 * Two clerks each pay one bill from a shared account. Every step holds the account's lock:
 * a clerk checks that the balance covers the bill, lets go of the lock, then takes it again
 * and pays. The check and the payment sit in separate critical sections, so when the other
 * clerk checks in between, both see enough money and the account ends overdrawn. On two cores
 * the window is a few hundred nanoseconds wide and the clerks start tens of microseconds
 * apart: natively it fails far more rarely than one run in a hundred.
 *
 * It knows nothing of tinytrace. `tinytrace hunt --chaos` records run after run, perturbing
 * the schedule at the lock operations, until one ends overdrawn, and keeps that recording;
 * `tinytrace replay` then takes the locks in the recorded order and fails the same way every
 * time (README.md).
 */
#include <pthread.h>
#include <stdio.h>

#define BILL 60

static pthread_mutex_t account = PTHREAD_MUTEX_INITIALIZER;
static int balance = 100;
static int paid[2];

static void *clerk(void *arg)
{
    int me = (int)(long)arg;
    pthread_mutex_lock(&account);
    int covered = balance >= BILL;
    pthread_mutex_unlock(&account);
    if (covered) {
        /* the bug: the balance may have changed since the check */
        pthread_mutex_lock(&account);
        balance -= BILL;
        paid[me] = 1;
        pthread_mutex_unlock(&account);
    }
    return NULL;
}

int main(void)
{
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, clerk, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    if (balance < 0) {
        printf("FAIL: the account is overdrawn: balance %d (both clerks paid)\n", balance);
        return 1;
    }
    printf("ok: balance %d (clerk %d paid)\n", balance, paid[0] ? 0 : 1);
    return 0;
}
