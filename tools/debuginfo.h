/* SPDX-License-Identifier: MIT */
/* tinytrace — names and source lines from a program's debug information (debuginfo.c, libdw).
 *
 *     tool_dbg *d = tool_dbg_open(path, build_id, build_id_len);  // NULL: none usable
 *     const char *name = d ? tool_dbg_symbol(d, 0x119c) : NULL;    // "leaf", valid for good
 *     char at[256];
 *     if (d && tool_dbg_line_of_symbol(d, "leaf", at, sizeof at) == 0) ...  // "prog.c:12"
 *
 * Not thread-safe; what tool_dbg_open returns lives until the tool exits.
 */
#ifndef TINYTRACE_TOOL_DEBUGINFO_H
#define TINYTRACE_TOOL_DEBUGINFO_H

#include <stddef.h>
#include <stdint.h>

typedef struct tool_dbg tool_dbg;

/* The debug information of the program file @path, which must have build-id @build_id
 * (@build_id_len 0: not checked); NULL when the file or its debug information cannot be read,
 * or it is another build. Opened once per path. */
tool_dbg *tool_dbg_open(const char *path, const uint8_t *build_id, size_t build_id_len);
/* The function that starts at @offset in the program, or NULL. */
const char *tool_dbg_symbol(tool_dbg *d, uint64_t offset);
/* "file:line" of the function that starts at @offset, or of function @name, into @buf;
 * 0, or -1 when the line table does not say. */
int tool_dbg_line_of_offset(tool_dbg *d, uint64_t offset, char *buf, size_t cap);
int tool_dbg_line_of_symbol(tool_dbg *d, const char *name, char *buf, size_t cap);
/* Splits a name the runtime gave a function without a symbol, "MODULE+0xHEX[@BUILDID]", into
 * the module's name and the offset; 0, or -1 when @name is not one. */
int tool_dbg_parse_offset(const char *name, size_t len, const char **module, size_t *module_len,
                          uint64_t *offset);

#endif
