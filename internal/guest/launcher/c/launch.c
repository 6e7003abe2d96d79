/*
 * toolgate-launch: the launcher behind every /tools/bin/NAME in a sandbox.
 * One plugin call over the agent socket (docs/protocol.md, "The launcher"):
 * the call header as JSON (or NDJSON with stdin frames, chunked), then the
 * gateway's answer, output written as it arrives, the handler's exit code.
 *
 * Why C: every call starts this process, and a Go program's runtime start
 * alone costs ~1 ms of CPU, more than the whole round trip to the gateway
 * (issue 13). Built static with musl (internal/proto/cclient/c/build.sh); the dial and the response
 * reader, the one parser of input from outside (fuzzed: fuzz_response.c),
 * are client.c's, shared with the CLI's front.
 *
 * Signals are not handled: SIGINT, SIGTERM, SIGHUP end the process as they
 * end any program, and the closed socket cancels the call on the host. A
 * closed stdout kills it with SIGPIPE; the socket is written with
 * MSG_NOSIGNAL, so a gateway gone is an error, not a signal.
 */
#include "client.c"

#include <pthread.h>
#include <sys/stat.h>

/* The protocol's names; internal/guest/launcher's tests check them against
 * internal/proto. */
#define TG_SOCKET_PATH "/run/toolgate/sock/gateway.sock"
#define TG_ENV_SOCKET "TOOLGATE_SOCKET"
#define TG_ENV_CALL_ID "TOOLGATE_CALL_ID"
#define TG_ENV_SESSION "TOOLGATE_SESSION"
#define TG_CALL_PREFIX "/v1/tools/"
#define TG_CALL_SUFFIX "/call"

/* Exit codes when the handler's own is not available (sysexits.h where one
 * fits): internal/proto's LaunchExit*, which the tests check. */
enum {
	EXIT_USAGE = 64,       /* the gateway refused the request as malformed or too large */
	EXIT_UNAVAILABLE = 69, /* gateway unreachable, or gone mid-call */
	EXIT_SOFTWARE = 70,    /* the tool failed without an exit code */
	EXIT_PROTOCOL = 76,    /* the gateway's answer made no sense */
	EXIT_DENIED = 77,      /* policy denied the call */
	EXIT_NOTFOUND = 127,   /* no such tool (as a shell's command not found) */
};

#define STDIN_CHUNK (32 << 10)  /* the most stdin one frame carries */

/* launcher_refused: a refusal's exit code by the answer's status; an error
 * frame's by its code. */
static int launcher_refused(int64_t status, const struct buf *code)
{
	switch (status) {
	case 0: return code && code->len == 6 && !memcmp(code->p, "denied", 6) ? EXIT_DENIED : EXIT_SOFTWARE;
	case 403: return EXIT_DENIED;
	case 404: return EXIT_NOTFOUND;
	case 400: case 413: case 415: return EXIT_USAGE;
	case 502: case 503: case 504: return EXIT_UNAVAILABLE;
	}
	return EXIT_SOFTWARE;
}

/* use_launcher_style makes the launcher's style the program's, its
 * messages naming the tool. */
static void use_launcher_style(const char *name)
{
	static struct style st = {.refused = launcher_refused, .audit_id = 1, .coded_errors = 1,
		.software = EXIT_SOFTWARE, .protocol = EXIT_PROTOCOL, .lost = EXIT_UNAVAILABLE};
	static struct buf prefix;
	st.prefix = "toolgate: ";
	style = &st; /* first: buf_printf may need oom, which needs it */
	prefix.len = 0;
	buf_printf(&prefix, "toolgate: %s: ", name);
	buf_addc(&prefix, 0);
	st.prefix = prefix.p;
}

/* call_header is the call's JSON header: argv, and cwd, session and parent
 * when set (hints; identity is the socket). */
static void call_header(struct buf *h, char **argv, int argc)
{
	buf_adds(h, "{\"argv\":[");
	for (int i = 0; i < argc; i++) {
		if (i)
			buf_addc(h, ',');
		json_str(h, argv[i]);
	}
	buf_addc(h, ']');
	char cwd[4096];
	const char *fields[][2] = {
		{"cwd", getcwd(cwd, sizeof cwd)},
		{"session", getenv(TG_ENV_SESSION)},
		{"parent", getenv(TG_ENV_CALL_ID)},
	};
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
		if (fields[i][1] && *fields[i][1]) {
			buf_printf(h, ",\"%s\":", fields[i][0]);
			json_str(h, fields[i][1]);
		}
	}
	buf_addc(h, '}');
}

static int valid_tool_name(const char *s) { return strlen(s) <= 128 && plain_name(s); }

static void append_chunk(struct buf *b, const char *p, size_t n)
{
	buf_printf(b, "%zx\r\n", n);
	buf_add(b, p, n);
	buf_adds(b, "\r\n");
}

static void append_base64(struct buf *b, const unsigned char *p, size_t n)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	buf_grow(b, (n + 2) / 3 * 4);
	char *o = b->p + b->len;
	size_t i = 0;
	for (; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		*o++ = a[v >> 18], *o++ = a[v >> 12 & 63], *o++ = a[v >> 6 & 63], *o++ = a[v & 63];
	}
	if (n - i == 1) {
		uint32_t v = (uint32_t)p[i] << 16;
		*o++ = a[v >> 18], *o++ = a[v >> 12 & 63], *o++ = '=', *o++ = '=';
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
		*o++ = a[v >> 18], *o++ = a[v >> 12 & 63], *o++ = a[v >> 6 & 63], *o++ = '=';
	}
	b->len = (size_t)(o - b->p);
}

/* append_stdin_chunk appends one stdin frame as one chunk of the body. */
static void append_stdin_chunk(struct buf *b, struct buf *frame, const unsigned char *p, size_t n)
{
	frame->len = 0;
	buf_adds(frame, "{\"stdin\":\"");
	append_base64(frame, p, n);
	buf_adds(frame, "\"}\n");
	append_chunk(b, frame->p, frame->len);
}

/* stdin_start decides whether the call gets our stdin. A terminal or
 * /dev/null (character devices) or a closed fd does not, so an interactive
 * launcher never waits for input nobody will type; nor does input already
 * at its end (an empty pipe or file: `true | tool`), which then costs no
 * stream. Otherwise the call streams stdin, starting with what was ready
 * (first, *nfirst bytes). */
static int stdin_start(unsigned char *first, size_t *nfirst)
{
	struct stat st;
	*nfirst = 0;
	if (fstat(0, &st) != 0 || S_ISCHR(st.st_mode))
		return 0;
	struct pollfd pfd = {.fd = 0, .events = POLLIN};
	struct timespec zero = {0, 0};
	if (ppoll(&pfd, 1, &zero, NULL) != 1 || pfd.revents == 0)
		return 1;
	ssize_t n;
	do
		n = read(0, first, STDIN_CHUNK);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return 0;
	*nfirst = (size_t)n;
	return 1;
}

/* send_stdin streams stdin as frames, then the eof frame and the end of the
 * chunked body. Errors end it quietly: the response says how the call went. */
static void *send_stdin(void *arg)
{
	int fd = (int)(intptr_t)arg;
	unsigned char *in = malloc(STDIN_CHUNK);
	struct buf frame = {0}, out = {0};
	if (!in)
		oom();
	for (;;) {
		ssize_t n = read(0, in, STDIN_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		out.len = 0;
		append_stdin_chunk(&out, &frame, in, (size_t)n);
		if (write_all(fd, out.p, out.len, 1) != 0)
			return NULL;
	}
	static const char end[] = "d\r\n{\"eof\":true}\n\r\n0\r\n\r\n";
	(void)write_all(fd, end, sizeof end - 1, 1);
	return NULL;
}

#ifndef TOOLGATE_FUZZ
int main(int argc, char **argv)
{
	const char *name = argc > 0 ? strrchr(argv[0], '/') : NULL;
	name = name ? name + 1 : argc > 0 ? argv[0] : "";
	use_launcher_style(name);
	struct buf m = {0};
	if (!valid_tool_name(name)) {
		buf_adds(&m, "toolgate: invalid tool name ");
		buf_quote(&m, name, strlen(name));
		buf_addc(&m, '\n');
		say(2, &m);
		return EXIT_USAGE;
	}
	const char *sock = getenv(TG_ENV_SOCKET);
	if (!sock || !*sock)
		sock = TG_SOCKET_PATH;
	struct buf hdr = {0}, req = {0}, why = {0};
	call_header(&hdr, argc > 1 ? argv + 1 : argv, argc > 1 ? argc - 1 : 0);

	int fd = dial(sock, &why);
	if (fd < 0) {
		buf_addc(&why, 0);
		buf_printf(&m, "%sgateway unavailable at %s: %s\n", style->prefix, sock, why.p);
		say(2, &m);
		return EXIT_UNAVAILABLE;
	}
	static unsigned char first[STDIN_CHUNK];
	size_t nfirst;
	int stream = stdin_start(first, &nfirst);
	buf_adds(&req, "POST " TG_CALL_PREFIX);
	buf_adds(&req, name);
	buf_adds(&req, TG_CALL_SUFFIX " HTTP/1.1\r\nHost: toolgate\r\nUser-Agent: toolgate-client\r\n");
	if (stream) {
		buf_adds(&req, "Content-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n");
		buf_addc(&hdr, '\n');
		append_chunk(&req, hdr.p, hdr.len);
		if (nfirst > 0) {
			struct buf frame = {0};
			append_stdin_chunk(&req, &frame, first, nfirst);
			buf_free(&frame);
		}
	} else {
		buf_printf(&req, "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n", hdr.len);
		buf_add(&req, hdr.p, hdr.len);
	}
	if (write_all(fd, req.p, req.len, 1) != 0) {
		buf_printf(&m, "%ssending the call to the gateway: %s\n", style->prefix, errtext(errno));
		say(2, &m);
		return EXIT_UNAVAILABLE;
	}
	if (stream) {
		pthread_t t;
		if (pthread_create(&t, NULL, send_stdin, (void *)(intptr_t)fd) != 0) {
			buf_printf(&m, "%sstreaming stdin: %s\n", style->prefix, errtext(errno));
			say(2, &m);
			return EXIT_SOFTWARE;
		}
	}
	struct source src = {.read = fd_read, .fd = fd};
	/* exit, not return: a stdin thread may still be blocked in its read */
	_exit(read_response(&src, 1, 2));
}
#endif
