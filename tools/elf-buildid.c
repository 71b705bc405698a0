/* SPDX-License-Identifier: MIT */
/* tinytrace — the GNU build-id of a program file, read from the file itself, with libelf.
 *
 * `tinytrace replay` refuses to run a program that is not the build that was recorded. The
 * recording holds the build-id the running program found in its own memory image (the first
 * NT_GNU_BUILD_ID note of the main executable's PT_NOTE segments); here we find the same note in
 * the file that is about to run, before it runs.
 *
 * The first bytes are read here: a "#!" script names its interpreter (record and replay follow
 * it), anything but a 64-bit ELF file is said to be one. The ELF file itself is read by
 * elfutils' libelf (Debian's libelf1), which checks every header, table and note against the
 * file's size and byte order:
 *   - the program headers (elf_getphdrnum, gelf_getphdr): PT_INTERP says the program is
 *     dynamically linked (LD_PRELOAD can only load the runtime into such a program); each
 *     PT_NOTE segment is read (elf_getdata_rawchunk, as notes aligned to 4 or 8) and its notes
 *     walked with gelf_getnote, which applies the alignment rule of glibc's
 *     ELF_NOTE_NEXT_OFFSET;
 *   - only if no segment holds it, the SHT_NOTE sections (a file whose note lies outside any
 *     segment is unusual, but the section table is the other place the note is written down).
 * A note segment or section larger than 1 MiB is reported, not read. libelf reads the file with
 * positional reads (ELF_C_READ), never mapping it, so a file that shrinks under us is an error,
 * not a SIGBUS. Only the tool links libelf: the runtime finds its build-id in memory.
 */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EHDR_SIZE 64u
#define READ_CAP (1u << 20)

static void set_problem(tool_elf_info *info, const char *what)
{
    if (info->problem[0] == '\0')
        snprintf(info->problem, sizeof info->problem, "%s", what);
}

/* Looks for the GNU build-id among the notes of @data. Returns 1 when found (info filled). */
static int scan_notes(Elf_Data *data, tool_elf_info *info)
{
    GElf_Nhdr nh;
    size_t off = 0, next, name_off, desc_off;

    while (off < data->d_size &&
           (next = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
        const unsigned char *buf = data->d_buf;
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
            memcmp(buf + name_off, "GNU", 4) == 0 && nh.n_descsz > 0) {
            info->build_id_len = nh.n_descsz;
            memcpy(info->build_id, buf + desc_off,
                   nh.n_descsz < TOOL_BUILD_ID_MAX ? nh.n_descsz : TOOL_BUILD_ID_MAX);
            return 1;
        }
        off = next;
    }
    return 0;
}

/* The first line of a "#!" script: interpreter and its optional single argument (Linux passes
 * the rest of the line, trimmed, as one argument). */
static void parse_shebang(const uint8_t *head, size_t n, tool_elf_info *info)
{
    size_t i = 2, start, end;

    info->is_script = 1;
    while (i < n && (head[i] == ' ' || head[i] == '\t'))
        i++;
    start = i;
    while (i < n && head[i] != ' ' && head[i] != '\t' && head[i] != '\n' && head[i] != '\0')
        i++;
    if (i - start >= sizeof info->interp)
        return; /* the kernel would refuse it too */
    memcpy(info->interp, head + start, i - start);
    info->interp[i - start] = '\0';
    while (i < n && (head[i] == ' ' || head[i] == '\t'))
        i++;
    start = i;
    while (i < n && head[i] != '\n' && head[i] != '\0')
        i++;
    end = i;
    while (end > start && (head[end - 1] == ' ' || head[end - 1] == '\t' || head[end - 1] == '\r'))
        end--;
    if (end - start < sizeof info->interp_arg) {
        memcpy(info->interp_arg, head + start, end - start);
        info->interp_arg[end - start] = '\0';
    }
}

static void read_elf(Elf *e, tool_elf_info *info)
{
    size_t phnum;
    Elf_Scn *scn = NULL;

    /* Program headers: PT_INTERP and the notes. */
    if (elf_getphdrnum(e, &phnum) != 0) {
        set_problem(info, "the program headers cannot be read");
        phnum = 0;
    }
    for (size_t i = 0; i < phnum; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(e, (int)i, &ph) == NULL) {
            set_problem(info, "a program header cannot be read");
            break;
        }
        if (ph.p_type == PT_INTERP)
            info->has_interp = 1;
        if (ph.p_type != PT_NOTE || info->build_id_len != 0 || ph.p_filesz < 12)
            continue;
        if (ph.p_filesz > READ_CAP) {
            set_problem(info, "a note segment is larger than 1 MiB");
            continue;
        }
        Elf_Data *data = elf_getdata_rawchunk(e, (int64_t)ph.p_offset, ph.p_filesz,
                                              ph.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR);
        if (data == NULL)
            set_problem(info, "a note lies beyond the end of the file");
        else
            scan_notes(data, info);
    }
    if (info->build_id_len != 0)
        return;

    /* Sections: SHT_NOTE. */
    while ((scn = elf_nextscn(e, scn)) != NULL && info->build_id_len == 0) {
        GElf_Shdr sh;
        if (gelf_getshdr(scn, &sh) == NULL) {
            set_problem(info, "a section header cannot be read");
            return;
        }
        if (sh.sh_type != SHT_NOTE || sh.sh_size < 12)
            continue;
        if (sh.sh_size > READ_CAP) {
            set_problem(info, "a note section is larger than 1 MiB");
            continue;
        }
        Elf_Data *data = elf_getdata(scn, NULL);
        if (data == NULL)
            set_problem(info, "a note lies beyond the end of the file");
        else
            scan_notes(data, info);
    }
}

/* Reads exactly @len bytes at offset 0. Returns 0, an errno, or -1 when the file is shorter. */
static int read_head(int fd, void *buf, size_t len)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno;
        if (n == 0)
            return -1; /* the file shrank under us */
        done += (size_t)n;
    }
    return 0;
}

int tool_elf_read(const char *path, tool_elf_info *info)
{
    struct stat st;
    uint8_t head[256];
    size_t n = 0;
    int fd, rc = 0;

    memset(info, 0, sizeof *info);
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return errno;
    if (fstat(fd, &st) != 0) {
        rc = errno;
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        set_problem(info, "not a regular file");
        goto out;
    }
    n = (uint64_t)st.st_size < sizeof head ? (size_t)st.st_size : sizeof head;
    rc = read_head(fd, head, n);
    if (rc != 0) {
        if (rc < 0) {
            rc = 0;
            set_problem(info, "the file changed while it was read");
        }
        goto out;
    }
    if (n >= 2 && head[0] == '#' && head[1] == '!') {
        parse_shebang(head, n, info);
        set_problem(info, "a script, not an ELF file");
        goto out;
    }
    if (n < 4 || memcmp(head, "\177ELF", 4) != 0) {
        set_problem(info, "not an ELF file");
        goto out;
    }
    info->is_elf = 1;
    if (n < EHDR_SIZE) {
        set_problem(info, "a truncated ELF file");
        goto out;
    }
    if (head[4] != ELFCLASS64) {
        set_problem(info, head[4] == ELFCLASS32 ? "a 32-bit ELF file"
                                                : "an ELF file of unknown class");
        goto out;
    }
    if (head[5] != ELFDATA2LSB && head[5] != ELFDATA2MSB) {
        set_problem(info, "an ELF file of unknown byte order");
        goto out;
    }
    info->is_elf64 = 1;
    if (elf_version(EV_CURRENT) == EV_NONE) {
        set_problem(info, "libelf is out of date");
        goto out;
    }
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    if (e == NULL || elf_kind(e) != ELF_K_ELF) {
        set_problem(info, "the ELF header cannot be read");
    } else {
        read_elf(e, info);
        if (info->build_id_len == 0)
            set_problem(info, "an ELF file without a GNU build-id note");
    }
    elf_end(e);
out:
    close(fd);
    return rc;
}
