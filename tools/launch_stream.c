/*
 * The launcher's output forwarding: each child's stdout and stderr are read
 * from pipes, cut into lines and written with the child's prefix, in
 * bounded pieces (launch.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "launch.h"
#include "launch_int.h"

/* ------------------------------------------------------------------ */
/* Output forwarding. */

/* Writes the whole iovec to |fd|. Errors other than EINTR/EAGAIN (EPIPE when
 * our reader went away) drop the rest: losing output must not stop the
 * supervisor. */
static void write_all(int fd, struct iovec *iov, int n) {
  while (n > 0) {
    ssize_t w = writev(fd, iov, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        poll(&p, 1, TICK_MS);
        continue;
      }
      return;
    }
    while (n > 0 && (size_t)w >= iov->iov_len) {
      w -= (ssize_t)iov->iov_len;
      iov++;
      n--;
    }
    if (n > 0) {
      iov->iov_base = (char *)iov->iov_base + w;
      iov->iov_len -= (size_t)w;
    }
  }
}

/* Forwards |len| bytes of one line (with or without its '\n'), prefixed, in
 * a single writev so that lines of different workers do not interleave. */
static void emit_line(struct launch_stream *s, const char *data, size_t len) {
  int has_nl = len > 0 && data[len - 1] == '\n';
  struct iovec iov[3] = {
      {.iov_base = s->prefix, .iov_len = strlen(s->prefix)},
      {.iov_base = (void *)data, .iov_len = len},
      {.iov_base = "\n", .iov_len = has_nl ? 0 : 1},
  };
  write_all(s->dest, iov, 3);
}

/* Forwards every complete line in the buffer and keeps the rest. */
static void emit_complete(struct launch_stream *s) {
  size_t start = 0;
  for (;;) {
    char *nl = memchr(s->buf + start, '\n', s->len - start);
    if (!nl) break;
    size_t end = (size_t)(nl - s->buf) + 1;
    emit_line(s, s->buf + start, end - start);
    start = end;
  }
  if (start > 0) {
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
  }
  if (s->len >= LINE_MAX_BYTES) {
    emit_line(s, s->buf, s->len);
    s->len = 0;
  }
}

void launch_stream_close(struct launch_stream *s) {
  if (!s || s->fd < 0) return;
  if (s->len > 0) emit_line(s, s->buf, s->len); /* last line had no '\n' */
  s->len = 0;
  close(s->fd);
  s->fd = -1;
}

/* Reads at most |budget| bytes from the stream and forwards complete lines.
 * Closes the stream at EOF or on a read error. */
void launch_stream_read(struct launch_stream *s, size_t budget) {
  while (s->fd >= 0 && budget > 0) {
    if (s->cap - s->len < 4096) {
      size_t cap = s->cap ? s->cap * 2 : 8192;
      char *b = realloc(s->buf, cap);
      if (!b) {
        /* Out of memory: forward what we have as a line and go on. */
        emit_line(s, s->buf, s->len);
        s->len = 0;
        if (s->cap == 0) {
          launch_stream_close(s);
          return;
        }
      } else {
        s->buf = b;
        s->cap = cap;
      }
    }
    size_t room = s->cap - s->len;
    if (room > budget) room = budget;
    ssize_t n = read(s->fd, s->buf + s->len, room);
    if (n > 0) {
      s->len += (size_t)n;
      budget -= (size_t)n;
      emit_complete(s);
    } else if (n == 0) {
      launch_stream_close(s);
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN) {
      return;
    } else {
      launch_stream_close(s);
    }
  }
}

void launch_stream_free(struct launch_stream *s) {
  if (!s) return;
  launch_stream_close(s);
  free(s->buf);
  free(s);
}

struct launch_stream *launch_stream_new(int fd, int dest, const char *prefix) {
  struct launch_stream *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->fd = fd;
  s->dest = dest;
  snprintf(s->prefix, sizeof s->prefix, "%s", prefix);
  fcntl(fd, F_SETFL, O_NONBLOCK);
  return s;
}
