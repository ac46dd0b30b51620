/*
 * jobrecord.h - the text of a timer job's record node <path>/last (internal).
 *
 * The record holds the id of the last completed slot as decimal text, written by whichever
 * host ran it; any client with write access may have put anything there, so the parser is
 * reached by tests and fuzzers through this entry point.
 */
#ifndef ZKIT_RECIPES_JOBRECORD_H
#define ZKIT_RECIPES_JOBRECORD_H
#include <stddef.h>
#include <stdint.h>

/* Parses the `len` bytes at `text` (NUL-terminated after them) as a slot id: 0, or -1 when
 * they are not exactly the decimal digits of a number within int64_t, with no sign, white
 * space or leading zero (the text zkit writes).  Whether the schedule can have reached that
 * slot is the reader's check. */
int zkit__job_parse_slot(const char *text, size_t len, int64_t *slot);

#endif
