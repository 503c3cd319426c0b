/* The process of every pod sandbox (the CRI "pause" image): it holds the pod's namespaces open,
 * reaps the zombies of processes re-parented to it, and exits cleanly when the runtime stops it. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_child(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

static void on_stop(int sig) {
  (void)sig;
  _exit(0);
}

int main(void) {
  struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP | SA_RESTART};
  struct sigaction stop = {.sa_handler = on_stop};
  sigaction(SIGCHLD, &child, NULL);
  sigaction(SIGTERM, &stop, NULL);
  sigaction(SIGINT, &stop, NULL);
  for (;;) pause();
}
