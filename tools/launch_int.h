/*
 * Private to the launcher (launch.c, launch_stream.c, launch_report.c):
 * the captured output streams of the children.
 */
#ifndef NEXAR_LAUNCH_INT_H
#define NEXAR_LAUNCH_INT_H

#include <stddef.h>

/* Supervisor tick: the longest the loop sleeps before checking children. */
#define TICK_MS 50
/* A line longer than this is forwarded in pieces (each with the prefix) so
 * that one worker cannot make the launcher buffer without bound. */
#define LINE_MAX_BYTES (1 << 20)
/* Bytes read from one pipe per wake-up, so a chatty worker cannot starve the
 * others or the supervisor's checks. */
#define READ_BUDGET (64 * 1024)
/* One captured output stream of one child. */
struct launch_stream {
  int fd;          /* read end of the pipe, -1 once closed */
  int dest;        /* where lines go: 1 (stdout) or 2 (stderr) */
  char prefix[24]; /* "[3] " or "" */
  char *buf;       /* bytes of the current, unfinished line */
  size_t len, cap;
};

/* A stream reading |fd| (made non-blocking) into |dest| (1 or 2) with
 * |prefix|; NULL when out of memory. */
struct launch_stream *launch_stream_new(int fd, int dest, const char *prefix);
/* Reads at most |budget| bytes and forwards complete lines. */
void launch_stream_read(struct launch_stream *s, size_t budget);
/* Forwards what is left (an unfinished line) and closes the pipe. */
void launch_stream_close(struct launch_stream *s);
void launch_stream_free(struct launch_stream *s);

#endif
