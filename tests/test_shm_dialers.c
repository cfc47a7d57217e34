/*
 * Many dialers at once on a rank's shared-memory rendezvous socket
 * (src/transport/shm_setup.c): at most ACCEPT_MAX (64) connections wait
 * to be identified, and the others must wait in the listen backlog, never
 * be accepted and closed (a dialer reads a closed socket as the rank's
 * process gone: 256 ranks on 16 CPUs failed so). Rank 0 finds rank 1's
 * listener (its abstract name "@nexar-shm-..." in /proc/net/unix, matched
 * to a socket of rank 1's pid), connects 80 sockets that never say HELLO,
 * and checks after 300 ms that none was closed; then it closes them and
 * the two ranks still exchange a barrier and an allreduce, with no failure
 * recorded. Before the fix 16 of the 80 were closed at once.
 */
#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "nexar.h"

#define DIALERS 80

/* Whether |pid| holds the socket of inode |ino|. */
static int holds(pid_t pid, unsigned long ino) {
  char dir[64], want[64];
  snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
  snprintf(want, sizeof want, "socket:[%lu]", ino);
  DIR *d = opendir(dir);
  if (!d) return 0;
  int found = 0;
  struct dirent *e;
  while (!found && (e = readdir(d))) {
    char path[600], link[64];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n > 0) {
      link[n] = 0;
      found = strcmp(link, want) == 0;
    }
  }
  closedir(d);
  return found;
}

/* The abstract name (without its leading 0) of |pid|'s listening
 * rendezvous socket: 0, or -1 when none is found. */
static int find_listener(pid_t pid, char *name, size_t len) {
  FILE *f = fopen("/proc/net/unix", "r");
  if (!f) return -1;
  char line[512];
  int rc = -1;
  while (rc < 0 && fgets(line, sizeof line, f)) {
    unsigned long ino;
    unsigned flags, st;
    char path[256] = "";
    /* Num RefCount Protocol Flags Type St Inode Path; listening: St 01
     * and flags __SO_ACCEPTCON (0x10000). */
    if (sscanf(line, "%*s %*s %*s %x %*s %x %lu %255s", &flags, &st, &ino,
               path) != 4)
      continue;
    if (strncmp(path, "@nexar-shm-", 11) != 0 || !(flags & 0x10000)) continue;
    if (!holds(pid, ino)) continue;
    snprintf(name, len, "%s", path + 1);
    rc = 0;
  }
  fclose(f);
  return rc;
}

static int worker(int index, void *arg) {
  (void)arg;
  (void)index;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  int64_t mine = getpid(), all[2];
  NT_OKC(w, nexar_allgather(w, &mine, all, 1, NEXAR_INT64));
  if (r == 0) {
    char name[108];
    NT_CHECKF(find_listener((pid_t)all[1], name, sizeof name) == 0,
              "no rendezvous socket of pid %lld", (long long)all[1]);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t nl = strlen(name);
    memcpy(a.sun_path + 1, name, nl);
    socklen_t alen =
        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + nl);
    int fds[DIALERS], made = 0;
    for (int i = 0; i < DIALERS; i++) {
      fds[i] = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0);
      NT_CHECK(fds[i] >= 0);
      made += connect(fds[i], (struct sockaddr *)&a, alen) == 0;
    }
    NT_CHECKF(made == DIALERS, "%d of %d connects succeeded", made, DIALERS);
    struct timespec ts = {0, 300 * 1000000L};
    nanosleep(&ts, NULL);
    int closed = 0;
    for (int i = 0; i < DIALERS; i++) {
      char b;
      closed += recv(fds[i], &b, 1, MSG_DONTWAIT) == 0;
    }
    for (int i = 0; i < DIALERS; i++) close(fds[i]);
    NT_CHECKF(closed == 0, "%d of %d silent dialers were closed", closed,
              DIALERS);
    printf("ok %d silent dialers: none closed\n", DIALERS);
  }
  NT_OKC(w, nexar_barrier(w));
  int64_t v = r + 1, s = 0;
  NT_OKC(w, nexar_allreduce(w, &v, &s, 1, NEXAR_INT64, NEXAR_SUM));
  NT_CHECKF(s == 3, "allreduce: %lld", (long long)s);
  nexar_failure_t f[2];
  int nf = -1;
  NT_OK(nexar_failures(ctx, f, 2, &nf));
  NT_CHECKF(nf == 0, "rank %d: %d failure(s)", r, nf);
  NT_OK(nexar_finalize(ctx));
  return 0;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  nt_opts_t o = {
      .world_size = 2, .timeout_ms = 30000, .env = "NEXAR_TRANSPORT=shm\n"};
  return nt_run(&o, worker, NULL) ? 1 : 0;
}
