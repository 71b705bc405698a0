/* tinytrace — the GNU build-id of a program file, read from the file itself.
 *
 * `tinytrace replay` refuses to run a program that is not the build that was recorded. The
 * recording holds the build-id the running program found in its own memory image (the first
 * NT_GNU_BUILD_ID note of the main executable's PT_NOTE segments); here we find the same note in
 * the file that is about to run, before it runs. No libelf: the part of ELF we need is small.
 *
 * What we read, all of it through positional reads bounded by the file size:
 *   - the ELF header (64 bytes): magic, class (64-bit only), byte order, and the offsets, entry
 *     sizes and counts of the program and section header tables;
 *   - the program headers: PT_INTERP says the program is dynamically linked (LD_PRELOAD can only
 *     load the runtime into such a program); each PT_NOTE segment is scanned for the note;
 *   - only if no segment holds it, the SHT_NOTE sections (a file whose note lies outside any
 *     segment is unusual, but the section table is the other place the note is written down).
 *
 * A note is { u32 namesz, u32 descsz, u32 type, name, desc }: the name starts after the 12-byte
 * header, the descriptor at the next multiple of the segment's alignment (4, or 8 for segments
 * aligned to 8) and the next note at the multiple after the descriptor — the rule of glibc's
 * ELF_NOTE_NEXT_OFFSET. Every size is a u32 from the file: all arithmetic is done in 64 bits and
 * checked against what was read, so a hostile or truncated file ends the scan, never the tool.
 * The table and note reads are capped (1 MiB each); larger ones are reported, not read.
 */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EHDR_SIZE 64u
#define PHDR_SIZE 56u
#define SHDR_SIZE 64u
#define READ_CAP (1u << 20)

#define PT_INTERP_ 3u
#define PT_NOTE_ 4u
#define SHT_NOTE_ 7u
#define NT_GNU_BUILD_ID_ 3u
#define PN_XNUM_ 0xffffu

struct elf_file {
    int fd;
    uint64_t size;
    int be; /* big-endian fields */
};

static uint16_t rd16(const struct elf_file *f, const uint8_t *p)
{
    return f->be ? (uint16_t)(p[0] << 8 | p[1]) : (uint16_t)(p[1] << 8 | p[0]);
}

static uint32_t rd32(const struct elf_file *f, const uint8_t *p)
{
    if (f->be)
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

static uint64_t rd64(const struct elf_file *f, const uint8_t *p)
{
    uint64_t a = rd32(f, p), b = rd32(f, p + 4);
    return f->be ? a << 32 | b : b << 32 | a;
}

/* Reads exactly @len bytes at @off. Returns 0, an errno, or -1 when the file is shorter. */
static int read_at(const struct elf_file *f, uint64_t off, void *buf, size_t len)
{
    size_t done = 0;
    if (off > f->size || len > f->size - off)
        return -1;
    while (done < len) {
        ssize_t n = pread(f->fd, (char *)buf + done, len - done, (off_t)(off + done));
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

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) & ~(a - 1); /* v < 2^33 here: no overflow */
}

static void set_problem(tool_elf_info *info, const char *what)
{
    if (info->problem[0] == '\0')
        snprintf(info->problem, sizeof info->problem, "%s", what);
}

/* Scans the notes in [@off, @off + @len) of the file for the GNU build-id. Returns 1 when found
 * (info filled), 0 when not, and a negated errno when the file cannot be read. */
static int scan_notes(const struct elf_file *f, uint64_t off, uint64_t len, uint64_t align,
                      tool_elf_info *info)
{
    uint8_t *buf;
    uint64_t pos = 0;
    int rc, found = 0;

    if (len < 12)
        return 0;
    if (off > f->size || len > f->size - off) {
        set_problem(info, "a note lies beyond the end of the file");
        return 0;
    }
    if (len > READ_CAP) {
        set_problem(info, "a note segment is larger than 1 MiB");
        return 0;
    }
    align = align == 8 ? 8 : 4;
    buf = malloc((size_t)len);
    if (buf == NULL)
        return -ENOMEM;
    rc = read_at(f, off, buf, (size_t)len);
    if (rc != 0) {
        free(buf);
        if (rc > 0)
            return -rc;
        set_problem(info, "a note lies beyond the end of the file");
        return 0;
    }
    while (pos <= len && len - pos >= 12) {
        uint64_t namesz = rd32(f, buf + pos), descsz = rd32(f, buf + pos + 4);
        uint32_t type = rd32(f, buf + pos + 8);
        uint64_t name_off = pos + 12;
        uint64_t desc_off = align_up(name_off + namesz, align);
        if (namesz > len - name_off || desc_off > len || descsz > len - desc_off)
            break; /* a note that does not fit: the rest of the segment is not notes */
        if (type == NT_GNU_BUILD_ID_ && namesz == 4 && memcmp(buf + name_off, "GNU", 4) == 0 &&
            descsz > 0) {
            info->build_id_len = (size_t)descsz;
            memcpy(info->build_id, buf + desc_off,
                   descsz < TOOL_BUILD_ID_MAX ? (size_t)descsz : TOOL_BUILD_ID_MAX);
            found = 1;
            break;
        }
        pos = align_up(desc_off + descsz, align);
    }
    free(buf);
    return found;
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

static int read_elf(const struct elf_file *f0, const uint8_t *eh, tool_elf_info *info)
{
    struct elf_file fv = *f0;
    const struct elf_file *f = &fv;
    uint64_t phoff, shoff, phnum, shnum, phentsize, shentsize;
    uint8_t *tab;
    int rc;

    fv.be = eh[5] == 2;
    phoff = rd64(f, eh + 32);
    shoff = rd64(f, eh + 40);
    phentsize = rd16(f, eh + 54);
    phnum = rd16(f, eh + 56);
    shentsize = rd16(f, eh + 58);
    shnum = rd16(f, eh + 60);

    /* Counts that do not fit in 16 bits are in section header 0 (sh_info: program headers,
     * sh_size: sections). */
    if ((phnum == PN_XNUM_ || shnum == 0) && shoff != 0 && shentsize >= SHDR_SIZE) {
        uint8_t sh0[SHDR_SIZE];
        if (read_at(f, shoff, sh0, sizeof sh0) == 0) {
            if (phnum == PN_XNUM_)
                phnum = rd32(f, sh0 + 44);
            if (shnum == 0)
                shnum = rd64(f, sh0 + 32);
        }
    }

    /* Program headers: PT_INTERP and the notes. */
    if (phnum > 0 && phentsize < PHDR_SIZE) {
        set_problem(info, "program headers are too small");
    } else if (phnum > 0) {
        uint64_t tab_len = phnum * phentsize; /* both < 2^32 */
        if (tab_len > READ_CAP) {
            set_problem(info, "the program header table is larger than 1 MiB");
        } else if (phoff > f->size || tab_len > f->size - phoff) {
            set_problem(info, "the program header table lies beyond the end of the file");
        } else {
            tab = malloc((size_t)tab_len);
            if (tab == NULL)
                return ENOMEM;
            rc = read_at(f, phoff, tab, (size_t)tab_len);
            if (rc > 0) {
                free(tab);
                return rc;
            }
            for (uint64_t i = 0; rc == 0 && i < phnum; i++) {
                const uint8_t *ph = tab + i * phentsize;
                uint32_t type = rd32(f, ph);
                if (type == PT_INTERP_)
                    info->has_interp = 1;
                if (type == PT_NOTE_ && info->build_id_len == 0) {
                    int s = scan_notes(f, rd64(f, ph + 8), rd64(f, ph + 32), rd64(f, ph + 48),
                                       info);
                    if (s < 0) {
                        free(tab);
                        return -s;
                    }
                }
            }
            free(tab);
        }
    }
    if (info->build_id_len != 0)
        return 0;

    /* Sections: SHT_NOTE. */
    if (shoff == 0 || shnum == 0)
        return 0;
    if (shentsize < SHDR_SIZE) {
        set_problem(info, "section headers are too small");
        return 0;
    }
    if (shnum > READ_CAP / shentsize) {
        set_problem(info, "the section header table is larger than 1 MiB");
        return 0;
    }
    if (shoff > f->size || shnum * shentsize > f->size - shoff) {
        set_problem(info, "the section header table lies beyond the end of the file");
        return 0;
    }
    tab = malloc((size_t)(shnum * shentsize));
    if (tab == NULL)
        return ENOMEM;
    rc = read_at(f, shoff, tab, (size_t)(shnum * shentsize));
    if (rc > 0) {
        free(tab);
        return rc;
    }
    for (uint64_t i = 0; rc == 0 && i < shnum && info->build_id_len == 0; i++) {
        const uint8_t *sh = tab + i * shentsize;
        if (rd32(f, sh + 4) == SHT_NOTE_) {
            int s = scan_notes(f, rd64(f, sh + 24), rd64(f, sh + 32), rd64(f, sh + 48), info);
            if (s < 0) {
                free(tab);
                return -s;
            }
        }
    }
    free(tab);
    return 0;
}

int tool_elf_read(const char *path, tool_elf_info *info)
{
    struct elf_file f;
    struct stat st;
    uint8_t head[256];
    size_t n = 0;
    int rc = 0;

    memset(info, 0, sizeof *info);
    f.fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (f.fd < 0)
        return errno;
    if (fstat(f.fd, &st) != 0) {
        rc = errno;
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        set_problem(info, "not a regular file");
        goto out;
    }
    f.size = (uint64_t)st.st_size;
    f.be = 0;
    n = f.size < sizeof head ? (size_t)f.size : sizeof head;
    rc = read_at(&f, 0, head, n);
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
    if (head[4] != 2) {
        set_problem(info, head[4] == 1 ? "a 32-bit ELF file" : "an ELF file of unknown class");
        goto out;
    }
    if (head[5] != 1 && head[5] != 2) {
        set_problem(info, "an ELF file of unknown byte order");
        goto out;
    }
    info->is_elf64 = 1;
    rc = read_elf(&f, head, info);
    if (rc == 0 && info->build_id_len == 0)
        set_problem(info, "an ELF file without a GNU build-id note");
out:
    close(f.fd);
    return rc;
}
