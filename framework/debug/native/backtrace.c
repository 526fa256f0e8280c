/* Native backtrace on fatal signals, chained in front of Python's faulthandler.
 *
 * On SIGSEGV, SIGBUS, SIGABRT, SIGFPE or SIGILL this prints the C-level call stack (glibc's
 * backtrace, async-signal-safe after a first warm-up call), then hands the signal to the handler
 * that was installed before (faulthandler, which prints every thread's Python stack and lets
 * the process die with the signal). Built by framework/debug/crash.py with the system's cc.
 */
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static struct sigaction previous[NSIG];
static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};

static void write_text(const char *text) {
    ssize_t ignored = write(STDERR_FILENO, text, strlen(text));
    (void)ignored;
}

static void write_number(int value) {
    char digits[16];
    int pos = sizeof(digits) - 1;
    digits[pos] = '\0';
    do {
        digits[--pos] = (char)('0' + value % 10);
        value /= 10;
    } while (value > 0 && pos > 0);
    write_text(digits + pos);
}

static void on_fatal_signal(int sig, siginfo_t *info, void *context) {
    void *frames[128];
    int count = backtrace(frames, 128);
    write_text("\nNative backtrace (signal ");
    write_number(sig);
    write_text("), innermost first:\n");
    backtrace_symbols_fd(frames, count, STDERR_FILENO);
    write_text("\n");
    struct sigaction *prev = &previous[sig];
    sigaction(sig, prev, NULL);
    if ((prev->sa_flags & SA_SIGINFO) && prev->sa_sigaction != NULL) {
        prev->sa_sigaction(sig, info, context);
    } else if (!(prev->sa_flags & SA_SIGINFO) && prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN) {
        prev->sa_handler(sig);
    } else {
        raise(sig);
    }
}

int framework_install_native_backtrace(void) {
    void *warm_up[1];
    backtrace(warm_up, 1); /* loads libgcc now: the first call may allocate, which a handler must not */
    for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++) {
        struct sigaction action;
        memset(&action, 0, sizeof(action));
        action.sa_sigaction = on_fatal_signal;
        action.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&action.sa_mask);
        if (sigaction(fatal_signals[i], &action, &previous[fatal_signals[i]]) != 0) {
            return -1;
        }
    }
    return 0;
}
