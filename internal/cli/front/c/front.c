/*
 * toolgate: the CLI's front. It makes `toolgate exec AGENT [--cwd D]
 * [--timeout T] [-c CMD] [--] ARGV…` itself — one call on the admin API —
 * and hands every other command line, unchanged, to toolgate-cli, the Go
 * CLI installed beside it. An exec it does not wholly understand (another
 * flag, --context, --help, a usage mistake) or cannot start (no admin
 * token, no daemon on the socket) goes to toolgate-cli too, before
 * anything is sent: the Go CLI then runs it or says what is wrong, in its
 * own words. Once the call is sent, its outcome is this program's.
 *
 * Why C: scripts run `toolgate exec` in loops, and a Go program's start and
 * exit were ~2 ms of the ~4.5 ms it took (issue 13); this one starts in
 * ~0.3 ms. The call and the answer are the launcher's (client.c: the same
 * dial, the same fuzzed reader); the route, the admin token and the exit
 * codes are the Go CLI's, and internal/cli/front's tests hold the two to the
 * same request, output and exit status (TestFrontMatchesCLI).
 *
 * Signals are not handled, as the Go CLI handles none for exec: the closed
 * socket cancels the call on the host.
 */
#include "client.c"

/* The Go CLI, beside this program (internal/cli/front.CLIBinary). */
#define CLI_BINARY "toolgate-cli"
/* The Go CLI's exit codes (internal/cli.ExitError, ExitDenied). */
#define EXIT_ERROR 125
#define EXIT_REFUSED 126
/* The admin API (internal/proto/api): the home's files and the media type
 * of a streamed answer. */
#define ADMIN_SOCKET "admin.sock"
#define ADMIN_TOKEN "admin.token"
#define MEDIA_NDJSON "application/x-ndjson"
#define TOKEN_MAX 4096

/* front_refused: denied and unauthorized are 126, as the Go CLI has it;
 * every other failure is toolgate's own, 125. */
static int front_refused(int64_t status, const struct buf *code)
{
	(void)status;
	if (code && ((code->len == 6 && !memcmp(code->p, "denied", 6)) ||
		     (code->len == 12 && !memcmp(code->p, "unauthorized", 12))))
		return EXIT_REFUSED;
	return EXIT_ERROR;
}

/* As the Go CLI: no audit id in an error; a result's error only when there
 * is no exit code (a timeout's own stderr has said it). */
static const struct style front_style = {.prefix = "toolgate: ", .refused = front_refused,
	.software = EXIT_ERROR, .protocol = EXIT_ERROR, .lost = EXIT_ERROR};

static char **command_line;

/* delegate replaces this process with toolgate-cli, given the same command
 * line: its flags, help, errors, exit status and pid. */
static _Noreturn void delegate(void)
{
	char path[PATH_MAX];
	struct buf m = {0};
	ssize_t n = readlink("/proc/self/exe", path, sizeof path - sizeof CLI_BINARY);
	char *slash = n > 0 ? memchr(path, '/', (size_t)n) : NULL;
	if (slash) {
		path[n] = 0;
		slash = strrchr(path, '/');
		memcpy(slash + 1, CLI_BINARY, sizeof CLI_BINARY);
		execv(path, command_line);
		buf_printf(&m, "toolgate: running %s, installed beside toolgate (%s): %s\n", CLI_BINARY, path, errtext(errno));
	} else {
		buf_printf(&m, "toolgate: finding %s beside toolgate: %s\n", CLI_BINARY, n < 0 ? errtext(errno) : "no path");
	}
	say(2, &m);
	_exit(EXIT_ERROR);
}

/* An exec the front makes: the values its flags gave (NULL: not given) and
 * its arguments, the agent first. */
struct exec_call {
	const char *home, *cwd, *timeout, *command;
	char **args;
	int nargs;
};

/* flag takes the value of the long flag --name at argv[*i] ("--name V" or
 * "--name=V", as pflag reads a string flag: the next word whatever it is):
 * 1 when argv[*i] is that flag, 0 when it is not, -1 when its value is
 * missing. */
static int flag(char **argv, int argc, int *i, const char *name, const char **v)
{
	const char *a = argv[*i] + 2;
	size_t n = strlen(name);
	if (strncmp(a, name, n) != 0)
		return 0;
	if (a[n] == '=') {
		*v = a + n + 1;
		return 1;
	}
	if (a[n] != 0)
		return 0;
	if (*i + 1 >= argc)
		return -1;
	*v = argv[++*i];
	return 1;
}

/* parse reads `toolgate [--home H] exec …` as cobra and pflag read it, for
 * the flags the front knows; 0 when it is such an exec, -1 for anything
 * else (the Go CLI's to run or refuse). */
static int parse(int argc, char **argv, struct exec_call *c)
{
	int in_exec = 0, i = 1;
	c->args = calloc((size_t)argc, sizeof *c->args);
	if (!c->args)
		oom();
	for (; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (a[0] != '-' || a[1] == 0) { /* a word, or "-" */
			if (!in_exec) {
				if (strcmp(a, "exec") != 0)
					return -1;
				in_exec = 1;
			} else {
				c->args[c->nargs++] = argv[i];
			}
			continue;
		}
		int r = 0;
		if (a[1] == '-') {
			r = flag(argv, argc, &i, "home", &c->home);
			if (!r && in_exec)
				r = flag(argv, argc, &i, "cwd", &c->cwd);
			if (!r && in_exec)
				r = flag(argv, argc, &i, "timeout", &c->timeout);
			if (!r && in_exec)
				r = flag(argv, argc, &i, "command", &c->command);
		} else if (in_exec && a[1] == 'c') { /* -c V, -cV, -c=V */
			r = 1;
			if (a[2] == '=')
				c->command = a + 3;
			else if (a[2])
				c->command = a + 2;
			else if (i + 1 < argc)
				c->command = argv[++i];
			else
				r = -1;
		}
		if (r != 1)
			return -1;
	}
	for (; i < argc; i++)
		c->args[c->nargs++] = argv[i];
	if (!in_exec || c->nargs < 1)
		return -1;
	if (c->command && !*c->command)
		c->command = NULL; /* an empty -c is none */
	if (!c->command && c->nargs < 2)
		return -1;
	return 0;
}

/* home_file is HOME/name for the home the flags name: --home, else
 * $TOOLGATE_HOME, else ~/.toolgate (an empty one counts as unset); -1
 * when there is none. */
static int home_file(const struct exec_call *c, const char *name, struct buf *out)
{
	const char *home = c->home && *c->home ? c->home : getenv("TOOLGATE_HOME");
	out->len = 0;
	if (home && *home) {
		buf_printf(out, "%s/%s", home, name);
	} else {
		const char *h = getenv("HOME");
		if (!h || !*h)
			return -1;
		buf_printf(out, "%s/.toolgate/%s", h, name);
	}
	buf_addc(out, 0);
	return 0;
}

/* read_token reads the admin token, trimmed; -1 when it cannot be read, is
 * empty or holds what a header cannot. */
static int read_token(const struct exec_call *c, char *tok, size_t max)
{
	struct buf path = {0};
	if (home_file(c, ADMIN_TOKEN, &path) != 0)
		return -1;
	int fd = open(path.p, O_RDONLY | O_CLOEXEC);
	buf_free(&path);
	if (fd < 0)
		return -1;
	size_t n = 0;
	for (;;) {
		ssize_t k = read(fd, tok + n, max - 1 - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		n += (size_t)k;
		if (n == max - 1)
			break;
	}
	close(fd);
	const char *t = tok;
	trim(&t, &n);
	memmove(tok, t, n);
	tok[n] = 0;
	if (n == 0 || n == max - 1)
		return -1;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)tok[i] < 0x20 || tok[i] == 0x7f)
			return -1;
	return 0;
}

/* body is the call's arguments as the Go CLI's json.Marshal of its map
 * writes them: keys sorted, strings as Go escapes them. */
static void body(struct buf *b, const struct exec_call *c)
{
	buf_addc(b, '{');
	if (c->command) {
		buf_adds(b, "\"command\":");
		json_str(b, c->command);
	} else {
		buf_adds(b, "\"argv\":[");
		for (int i = 1; i < c->nargs; i++) {
			if (i > 1)
				buf_addc(b, ',');
			json_str(b, c->args[i]);
		}
		buf_addc(b, ']');
	}
	if (c->cwd && *c->cwd) {
		buf_adds(b, ",\"cwd\":");
		json_str(b, c->cwd);
	}
	if (c->timeout && *c->timeout) {
		buf_adds(b, ",\"timeout\":");
		json_str(b, c->timeout);
	}
	buf_addc(b, '}');
}

int main(int argc, char **argv)
{
	style = &front_style;
	command_line = argv;
	struct exec_call c = {0};
	static char tok[TOKEN_MAX];
	struct buf sock = {0}, why = {0}, args = {0}, req = {0};
	/* An agent's name to escape in the route, a home without a token: the
	 * Go CLI's. */
	if (argc < 1 || parse(argc, argv, &c) != 0 || !plain_name(c.args[0]) ||
	    read_token(&c, tok, sizeof tok) != 0 || home_file(&c, ADMIN_SOCKET, &sock) != 0)
		delegate();
	int fd = dial(sock.p, &why);
	if (fd < 0)
		delegate(); /* nothing was sent: the Go CLI tries, and says why it cannot */
	body(&args, &c);
	buf_printf(&req, "POST /v1/agents/%s/tools/exec/call HTTP/1.1\r\nHost: toolgate\r\nConnection: close\r\n"
		"Authorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: " MEDIA_NDJSON "\r\n"
		"Content-Length: %zu\r\n\r\n", c.args[0], tok, args.len);
	buf_add(&req, args.p, args.len);
	/* A failed write shows in the answer read next, as for the Go CLI. */
	(void)write_all(fd, req.p, req.len, 1);
	struct source src = {.read = fd_read, .fd = fd};
	return read_response(&src, 1, 2);
}
