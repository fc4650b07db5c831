/* Minimal pod sandbox ("pause") process for the ringleader test cluster.
 * Holds the pod's namespaces, reaps zombies (it is PID 1 in a shared PID namespace)
 * and exits cleanly on SIGINT/SIGTERM. Built with `gcc -static -Os`. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_term(int sig) {
  (void)sig;
  _exit(0);
}

static void on_child(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    printf("pause (ringleader) 3.10-rl1\n");
    return 0;
  }
  if (getpid() != 1) fprintf(stderr, "Warning: pause should be the first process\n");
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_term;
  if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0) return 1;
  sa.sa_handler = on_child;
  sa.sa_flags = SA_NOCLDSTOP;
  if (sigaction(SIGCHLD, &sa, NULL) < 0) return 2;
  for (;;) pause();
  return 42;
}
