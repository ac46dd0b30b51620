/*
 * zkl-msg.c - the tools' messages on stderr: one line each, prefixed with the program's name
 * ("zkit-lock: ", "zkit-watch: "), at the verbosity the options chose.  The bottom of the
 * tools: every other part uses it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tools/zkit-lock.h"

static zkl_verbosity_t verbosity = ZKL_NORMAL;
static const char *program = "zkit-lock";

void zkl_set_program(const char *name)
{
    program = name;
}

const char *zkl_program(void)
{
    return program;
}

void zkl_set_verbosity(zkl_verbosity_t v)
{
    verbosity = v;
}

/* One write per line, so lines from the library's threads do not interleave with ours. */
static void vmessage(const char *fmt, va_list ap)
{
    char line[1024];
    int n = snprintf(line, sizeof(line), "%s: ", program);
    vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    strcat(line, "\n");
    fputs(line, stderr);
}

void zkl_info(const char *fmt, ...)
{
    va_list ap;
    if (verbosity < ZKL_VERBOSE)
        return;
    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
}

void zkl_note(const char *fmt, ...)
{
    va_list ap;
    if (verbosity < ZKL_NORMAL)
        return;
    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
}

void zkl_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
}
