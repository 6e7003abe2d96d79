/*
 * The client side of a call to the gateway, shared by toolgate's two C
 * programs: toolgate-launch (launch.c), the launcher behind every
 * /tools/bin/NAME in a sandbox, and toolgate (front.c), the CLI's front,
 * which makes `toolgate exec` itself. Each includes this file (one
 * translation unit per program: everything is static, nothing to link).
 * Here: growable buffers, Go's JSON string encoding, the dial, and the
 * gateway's answer — the one parser of input from outside, fuzzed
 * (fuzz_response.c). The two differ only in how they report the outcome:
 * their style.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

/* ---- growable buffers ---- */

struct buf {
	char *p;
	size_t len, cap;
};

#define DIAL_TIMEOUT_S 2        /* a Unix socket answers at once or its listener is gone */
#define HEAD_LINE_MAX (32 << 10) /* a head line longer than this is an error */
#define ERROR_BODY_MAX (1 << 20) /* the most of an error body read */
#define JSON_MAX_DEPTH 10000

/* A style is how a program reports a call's outcome: the words before each
 * message and the exit codes. The launcher is a plugin tool and exits with
 * sysexits codes; the CLI front exits as the Go CLI does. */
struct style {
	const char *prefix; /* begins every message: "toolgate: NAME: " */
	int audit_id;       /* an error names the call's audit id */
	int coded_errors;   /* a result's error is told even with an exit code */
	/* refused is the exit code of an error answer, given its HTTP status
	 * (0 for an error frame) and its code (NULL when the body is none). */
	int (*refused)(int64_t status, const struct buf *code);
	int software; /* the tool failed without an exit code; out of memory */
	int protocol; /* the gateway's answer made no sense */
	int lost;     /* the gateway went away before the outcome was known */
};

/* style is the program's, set first thing in main. */
static const struct style *style;

static void oom(void)
{
	static const char m[] = "toolgate: out of memory\n";
	(void)!write(2, m, sizeof m - 1);
	_exit(style->software);
}

static void buf_grow(struct buf *b, size_t n)
{
	if (n <= b->cap - b->len)
		return;
	if (n > SIZE_MAX / 2 - b->len)
		oom();
	size_t c = b->cap ? b->cap : 256;
	while (c - b->len < n)
		c *= 2;
	char *p = realloc(b->p, c);
	if (!p)
		oom();
	b->p = p;
	b->cap = c;
}

static void buf_add(struct buf *b, const void *p, size_t n)
{
	buf_grow(b, n);
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
}

static void buf_adds(struct buf *b, const char *s) { buf_add(b, s, strlen(s)); }
static void buf_addc(struct buf *b, char c) { buf_add(b, &c, 1); }

static void buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char tmp[64];
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof tmp) {
		buf_add(b, tmp, (size_t)n);
		return;
	}
	buf_grow(b, (size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

static void buf_free(struct buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

/* ---- output ---- */

/* write_all writes p to fd whole; a non-blocking fd inherited from the
 * caller is waited for. Errors end it quietly (a closed stdout has already
 * raised SIGPIPE). */
static int write_all(int fd, const void *p, size_t n, int sock)
{
	const char *c = p;
	while (n > 0) {
		ssize_t k = sock ? send(fd, c, n, MSG_NOSIGNAL) : write(fd, c, n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				struct pollfd pfd = {.fd = fd, .events = POLLOUT};
				(void)poll(&pfd, 1, -1);
				continue;
			}
			return -1;
		}
		c += k;
		n -= (size_t)k;
	}
	return 0;
}

/* errtext is Go's text for the errors a launcher meets, so messages read
 * the same as they did from the Go launcher; others are strerror's. */
static const char *errtext(int e)
{
	switch (e) {
	case ENOENT: return "no such file or directory";
	case ECONNREFUSED: return "connection refused";
	case ECONNRESET: return "connection reset by peer";
	case EACCES: return "permission denied";
	case EPIPE: return "broken pipe";
	case ENOTSOCK: return "socket operation on non-socket";
	case EINVAL: return "invalid argument";
	case ENOTDIR: return "not a directory";
	case ELOOP: return "too many levels of symbolic links";
	case EBADF: return "bad file descriptor";
	case EMFILE: return "too many open files";
	case ENOMEM: return "cannot allocate memory";
	case EAGAIN: return "resource temporarily unavailable";
	case EPROTOTYPE: return "protocol wrong type for socket";
	}
	return strerror(e);
}

/* utf8_len is the length of the valid UTF-8 sequence at p (at most n
 * bytes), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *p, size_t n, uint32_t *r)
{
	if (p[0] < 0x80) {
		*r = p[0];
		return 1;
	}
	size_t l;
	uint32_t c, min;
	if ((p[0] & 0xe0) == 0xc0) l = 2, c = p[0] & 0x1f, min = 0x80;
	else if ((p[0] & 0xf0) == 0xe0) l = 3, c = p[0] & 0x0f, min = 0x800;
	else if ((p[0] & 0xf8) == 0xf0) l = 4, c = p[0] & 0x07, min = 0x10000;
	else return 0;
	if (l > n)
		return 0;
	for (size_t i = 1; i < l; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (p[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*r = c;
	return l;
}

/* buf_quote appends s as Go's %q does for the text a launcher prints:
 * quotes, escapes for controls and invalid bytes, other runes as they are. */
static void buf_quote(struct buf *b, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	buf_addc(b, '"');
	for (size_t i = 0; i < n;) {
		uint32_t r;
		size_t l = utf8_len(p + i, n - i, &r);
		if (l == 0) {
			buf_printf(b, "\\x%02x", p[i]);
			i++;
			continue;
		}
		switch (r) {
		case '"': buf_adds(b, "\\\""); break;
		case '\\': buf_adds(b, "\\\\"); break;
		case '\a': buf_adds(b, "\\a"); break;
		case '\b': buf_adds(b, "\\b"); break;
		case '\f': buf_adds(b, "\\f"); break;
		case '\n': buf_adds(b, "\\n"); break;
		case '\r': buf_adds(b, "\\r"); break;
		case '\t': buf_adds(b, "\\t"); break;
		case '\v': buf_adds(b, "\\v"); break;
		default:
			if (r < 0x20 || r == 0x7f)
				buf_printf(b, "\\x%02x", (unsigned)r);
			else if (r >= 0x80 && r <= 0xa0)
				buf_printf(b, "\\u%04x", (unsigned)r);
			else
				buf_add(b, p + i, l);
		}
		i += l;
	}
	buf_addc(b, '"');
}

/* say writes one message to fd in one write. */
static void say(int fd, struct buf *m)
{
	(void)write_all(fd, m->p, m->len, 0);
	buf_free(m);
}

/* ---- the request ---- */

/* plain_name: s is one path segment that needs no escaping in a URL —
 * ASCII letters, digits, '-', '_' and '.', not "." or ".." — as tool and
 * agent names in the calls' routes are. */
static int plain_name(const char *s)
{
	if (!*s || !strcmp(s, ".") || !strcmp(s, ".."))
		return 0;
	for (; *s; s++) {
		char c = *s;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'))
			return 0;
	}
	return 1;
}

/* json_str appends s as a JSON string, as Go's encoding/json writes it:
 * HTML characters and U+2028/9 escaped, invalid UTF-8 as U+FFFD. */
static void json_str(struct buf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);
	buf_addc(b, '"');
	for (size_t i = 0; i < n;) {
		uint32_t r;
		size_t l = utf8_len(p + i, n - i, &r);
		if (l == 0) {
			buf_adds(b, "\\ufffd");
			i++;
			continue;
		}
		switch (r) {
		case '"': buf_adds(b, "\\\""); break;
		case '\\': buf_adds(b, "\\\\"); break;
		case '\b': buf_adds(b, "\\b"); break;
		case '\f': buf_adds(b, "\\f"); break;
		case '\n': buf_adds(b, "\\n"); break;
		case '\r': buf_adds(b, "\\r"); break;
		case '\t': buf_adds(b, "\\t"); break;
		case 0x2028: buf_adds(b, "\\u2028"); break;
		case 0x2029: buf_adds(b, "\\u2029"); break;
		default:
			if (r < 0x20 || r == '<' || r == '>' || r == '&') {
				char e[6] = {'\\', 'u', '0', '0', hex[r >> 4], hex[r & 15]};
				buf_add(b, e, sizeof e);
			} else {
				buf_add(b, p + i, l);
			}
		}
		i += l;
	}
	buf_addc(b, '"');
}

/* dial connects to the Unix socket at path, waiting at most DIAL_TIMEOUT_S
 * for room in its listen queue; on failure it returns -1 with why in err. */
static int dial(const char *path, struct buf *err)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		buf_printf(err, "socket: %s", errtext(errno));
		return -1;
	}
	if (fd < 3) {
		/* stdin, stdout or stderr was closed, and the socket took its
		 * place: move it, and the closed ones become /dev/null (as the Go
		 * runtime does at start), so output never goes to the gateway. */
		int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		close(fd);
		if (moved < 0) {
			buf_printf(err, "socket: %s", errtext(errno));
			return -1;
		}
		fd = moved;
		for (int i = 0; i < 3; i++)
			if (fcntl(i, F_GETFD) < 0 && open("/dev/null", O_RDWR) != i) {
				buf_printf(err, "opening /dev/null: %s", errtext(errno));
				close(fd);
				return -1;
			}
	}
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t n = strlen(path);
	if (n > sizeof sa.sun_path) {
		buf_printf(err, "connect: %s", errtext(EINVAL));
		close(fd);
		return -1;
	}
	memcpy(sa.sun_path, path, n);
	if (n > 0 && sa.sun_path[0] == '@')
		sa.sun_path[0] = 0; /* an abstract socket, as Go names them */
	/* A blocking connect on a Unix socket waits for the listen queue as long
	 * as the send timeout allows; reset after, so writes never time out. */
	struct timeval tv = {DIAL_TIMEOUT_S, 0}, none = {0, 0};
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	int r;
	do
		r = connect(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n));
	while (r != 0 && errno == EINTR);
	if (r != 0) {
		int e = errno;
		close(fd);
		if (e == EAGAIN)
			buf_printf(err, "connect: no answer within %ds", DIAL_TIMEOUT_S);
		else
			buf_printf(err, "connect: %s", errtext(e));
		return -1;
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof none);
	return fd;
}

/* ---- the response: the one parser of input from outside (fuzzed) ---- */

/* A source of bytes: the socket, or memory in the fuzzer. read returns
 * >0, 0 at the end, or -errno. */
struct source {
	long (*read)(struct source *, char *, size_t);
	int fd;
	const char *mem;
	size_t memlen;
};

static long fd_read(struct source *s, char *p, size_t n)
{
	for (;;) {
		ssize_t k = read(s->fd, p, n);
		if (k >= 0)
			return (long)k;
		if (errno != EINTR)
			return -(long)errno;
	}
}

/* Errors of reading, as the Go launcher told them apart. */
enum rerr { RD_OK, RD_EOF, RD_UNEXPECTED_EOF, RD_ERRNO, RD_MSG };

struct reader {
	struct source *src;
	size_t start, end; /* of buf */
	enum rerr err; /* sticky once the source failed */
	int errnum;
	/* the body */
	int chunked, done;
	int64_t left; /* of the chunk, or of Content-Length; -1: to the end */
	struct buf msg; /* RD_MSG's text */
	struct buf pend; /* body read, not yet taken as lines (from off) */
	size_t off;
	char buf[HEAD_LINE_MAX]; /* last: only the fields above are reset per answer */
};

/* fill reads more into the buffer, making room first. */
static int fill(struct reader *r)
{
	if (r->err)
		return -1;
	if (r->start > 0) {
		memmove(r->buf, r->buf + r->start, r->end - r->start);
		r->end -= r->start;
		r->start = 0;
	}
	if (r->end == sizeof r->buf)
		return -1;
	long k = r->src->read(r->src, r->buf + r->end, sizeof r->buf - r->end);
	if (k == 0) {
		r->err = RD_EOF;
		return -1;
	}
	if (k < 0) {
		r->err = RD_ERRNO;
		r->errnum = (int)-k;
		return -1;
	}
	r->end += (size_t)k;
	return 0;
}

/* head_line returns the next line of the head (with its newline) in *line,
 * or -1: the end of the source, or a line over HEAD_LINE_MAX (*full). */
static int head_line(struct reader *r, const char **line, size_t *n, int *full)
{
	size_t scanned = 0;
	*full = 0;
	for (;;) {
		char *nl = memchr(r->buf + r->start + scanned, '\n', r->end - r->start - scanned);
		if (nl) {
			*line = r->buf + r->start;
			*n = (size_t)(nl + 1 - *line);
			r->start += *n;
			return 0;
		}
		scanned = r->end - r->start;
		if (scanned == sizeof r->buf) {
			*full = 1;
			return -1;
		}
		if (fill(r) != 0)
			return -1;
	}
}

static int is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static void trim(const char **p, size_t *n)
{
	while (*n && is_space((unsigned char)**p))
		(*p)++, (*n)--;
	while (*n && is_space((unsigned char)(*p)[*n - 1]))
		(*n)--;
}

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

static int equal_fold(const char *a, size_t n, const char *b)
{
	if (strlen(b) != n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (lower((unsigned char)a[i]) != lower((unsigned char)b[i]))
			return 0;
	return 1;
}

/* parse_int parses a decimal (base 10) or hex (base 16) integer as Go's
 * strconv.ParseInt does: an optional sign, digits, int64's range. */
static int parse_int(const char *p, size_t n, int base, int64_t *v)
{
	int neg = 0;
	if (n && (*p == '+' || *p == '-'))
		neg = *p == '-', p++, n--;
	if (n == 0)
		return -1;
	uint64_t u = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	for (size_t i = 0; i < n; i++) {
		int c = lower((unsigned char)p[i]), d;
		if (c >= '0' && c <= '9') d = c - '0';
		else if (base == 16 && c >= 'a' && c <= 'f') d = c - 'a' + 10;
		else return -1;
		if (u > (limit - (uint64_t)d) / (uint64_t)base)
			return -1;
		u = u * (uint64_t)base + (uint64_t)d;
	}
	*v = neg ? (int64_t)(0 - u) : (int64_t)u;
	return 0;
}

/* read_head reads the status line and the headers the launcher cares about;
 * on failure it leaves the reason in why. */
static int read_head(struct reader *r, int64_t *status, struct buf *why)
{
	const char *line;
	size_t n;
	int full;
	r->left = -1;
	if (head_line(r, &line, &n, &full) != 0)
		goto fail;
	/* HTTP/1.1 200 OK */
	const char *f[2] = {0};
	size_t fl[2] = {0}, nf = 0;
	for (size_t i = 0; i < n && nf < 2;) {
		while (i < n && is_space((unsigned char)line[i]))
			i++;
		if (i == n)
			break;
		f[nf] = line + i;
		while (i < n && !is_space((unsigned char)line[i]))
			i++;
		fl[nf] = (size_t)(line + i - f[nf]);
		nf++;
	}
	if (nf < 2 || fl[0] < 7 || memcmp(f[0], "HTTP/1.", 7) != 0) {
		const char *t = line;
		size_t tn = n;
		trim(&t, &tn);
		buf_adds(why, "not an HTTP response: ");
		buf_quote(why, t, tn);
		return -1;
	}
	if (parse_int(f[1], fl[1], 10, status) != 0) {
		buf_adds(why, "bad status ");
		buf_quote(why, f[1], fl[1]);
		return -1;
	}
	for (;;) {
		if (head_line(r, &line, &n, &full) != 0)
			goto fail;
		while (n && (line[n - 1] == '\r' || line[n - 1] == '\n'))
			n--;
		const char *colon = memchr(line, ':', n);
		if (!colon)
			return 0; /* the blank line */
		size_t kn = (size_t)(colon - line);
		const char *v = colon + 1;
		size_t vn = n - kn - 1;
		trim(&v, &vn);
		if (equal_fold(line, kn, "transfer-encoding")) {
			r->chunked = equal_fold(v, vn, "chunked");
		} else if (equal_fold(line, kn, "content-length")) {
			if (parse_int(v, vn, 10, &r->left) != 0 || r->left < 0) {
				buf_adds(why, "bad Content-Length ");
				buf_quote(why, v, vn);
				return -1;
			}
		}
	}
fail:
	if (full)
		buf_adds(why, "bufio: buffer full");
	else if (r->err == RD_ERRNO)
		buf_adds(why, errtext(r->errnum));
	else
		buf_adds(why, "EOF");
	return -1;
}

/* body_read reads up to n bytes of the body into p: >0, 0 at its end, -1
 * on an error (left in r->err). The end of the source inside a chunked body
 * is RD_UNEXPECTED_EOF. */
static long body_read(struct reader *r, char *p, size_t n)
{
	if (r->done)
		return 0;
	if (r->chunked && r->left <= 0) {
		const char *line;
		size_t ln;
		int full;
		if (head_line(r, &line, &ln, &full) != 0) {
			if (full) {
				r->err = RD_MSG;
				buf_adds(&r->msg, "bufio: buffer full");
			} else if (r->err == RD_EOF) {
				r->err = RD_UNEXPECTED_EOF;
			}
			return -1;
		}
		const char *semi = memchr(line, ';', ln);
		size_t sn = semi ? (size_t)(semi - line) : ln;
		trim(&line, &sn);
		int64_t size;
		if (parse_int(line, sn, 16, &size) != 0 || size < 0) {
			r->err = RD_MSG;
			buf_adds(&r->msg, "bad chunk size ");
			buf_quote(&r->msg, line, sn);
			return -1;
		}
		if (size == 0) {
			r->done = 1;
			return 0;
		}
		r->left = size;
	}
	if (!r->chunked && r->left == 0) {
		r->done = 1;
		return 0;
	}
	if (r->start == r->end && fill(r) != 0) {
		if (r->chunked && r->err == RD_EOF)
			r->err = RD_UNEXPECTED_EOF;
		return -1;
	}
	size_t k = r->end - r->start;
	if (k > n)
		k = n;
	if (r->left >= 0 && (uint64_t)k > (uint64_t)r->left)
		k = (size_t)r->left;
	memcpy(p, r->buf + r->start, k);
	r->start += k;
	if (r->left > 0)
		r->left -= (int64_t)k;
	if (r->chunked && r->left == 0) { /* the CRLF after the data */
		for (int i = 0; i < 2; i++) {
			if (r->start == r->end && fill(r) != 0) {
				if (r->err == RD_EOF)
					r->err = RD_UNEXPECTED_EOF;
				return (long)k;
			}
			r->start++;
		}
	}
	return (long)k;
}

/* ---- JSON: validated whole, as encoding/json does; only the few fields a
 * launcher reads are decoded. ---- */

struct json {
	const char *p, *end;
	int depth;
	struct buf *why; /* the first error */
};

static int j_fail(struct json *j, const char *what)
{
	if (j->why->len == 0)
		buf_adds(j->why, what);
	return -1;
}

static void j_ws(struct json *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static int hexval(int c)
{
	c = lower(c);
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int j_hex4(struct json *j, uint32_t *v)
{
	if (j->end - j->p < 4)
		return j_fail(j, "unexpected end of JSON input");
	*v = 0;
	for (int i = 0; i < 4; i++) {
		int h = hexval((unsigned char)j->p[i]);
		if (h < 0)
			return j_fail(j, "invalid character in \\u hexadecimal character escape");
		*v = *v << 4 | (uint32_t)h;
	}
	j->p += 4;
	return 0;
}

static void put_rune(struct buf *o, uint32_t r)
{
	char e[4];
	if (r < 0x80) { buf_addc(o, (char)r); return; }
	if (r < 0x800) { e[0] = (char)(0xc0 | r >> 6), e[1] = (char)(0x80 | (r & 63)); buf_add(o, e, 2); return; }
	if (r < 0x10000) { e[0] = (char)(0xe0 | r >> 12), e[1] = (char)(0x80 | (r >> 6 & 63)), e[2] = (char)(0x80 | (r & 63)); buf_add(o, e, 3); return; }
	e[0] = (char)(0xf0 | r >> 18), e[1] = (char)(0x80 | (r >> 12 & 63)), e[2] = (char)(0x80 | (r >> 6 & 63)), e[3] = (char)(0x80 | (r & 63));
	buf_add(o, e, 4);
}

/* j_string reads a string at j->p (its opening quote), decoded into out
 * when out is set. */
static int j_string(struct json *j, struct buf *out)
{
	j->p++;
	for (;;) {
		if (j->p >= j->end)
			return j_fail(j, "unexpected end of JSON input");
		unsigned char c = (unsigned char)*j->p;
		if (c == '"') {
			j->p++;
			return 0;
		}
		if (c < 0x20)
			return j_fail(j, "invalid character in string literal");
		if (c == '\\') {
			if (j->end - j->p < 2)
				return j_fail(j, "unexpected end of JSON input");
			char e = j->p[1];
			j->p += 2;
			const char *simple = strchr("\"\\/bfnrt", e);
			if (e && simple) {
				static const char to[] = "\"\\/\b\f\n\r\t";
				if (out)
					buf_addc(out, to[simple - "\"\\/bfnrt"]);
				continue;
			}
			if (e != 'u')
				return j_fail(j, "invalid character in string escape code");
			uint32_t r;
			if (j_hex4(j, &r) != 0)
				return -1;
			if (r >= 0xd800 && r < 0xdc00) { /* a surrogate pair, if the next is its half */
				uint32_t lo;
				if (j->end - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u') {
					const char *save = j->p;
					j->p += 2;
					if (j_hex4(j, &lo) != 0)
						return -1;
					if (lo >= 0xdc00 && lo < 0xe000)
						r = 0x10000 + ((r - 0xd800) << 10) + (lo - 0xdc00);
					else
						r = 0xfffd, j->p = save;
				} else {
					r = 0xfffd;
				}
			} else if (r >= 0xdc00 && r < 0xe000) {
				r = 0xfffd;
			}
			if (out)
				put_rune(out, r);
			continue;
		}
		uint32_t r;
		size_t l = utf8_len((const unsigned char *)j->p, (size_t)(j->end - j->p), &r);
		if (l == 0) {
			if (out)
				put_rune(out, 0xfffd);
			j->p++;
		} else {
			if (out)
				buf_add(out, j->p, l);
			j->p += l;
		}
	}
}

static int j_digits(struct json *j)
{
	const char *s = j->p;
	while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
		j->p++;
	return j->p > s ? 0 : j_fail(j, "invalid character in numeric literal");
}

/* j_number reads a number; *integral tells whether it is a plain integer. */
static int j_number(struct json *j, int *integral)
{
	*integral = 1;
	if (j->p < j->end && *j->p == '-')
		j->p++;
	if (j->p < j->end && *j->p == '0')
		j->p++;
	else if (j_digits(j) != 0)
		return -1;
	if (j->p < j->end && *j->p == '.') {
		j->p++, *integral = 0;
		if (j_digits(j) != 0)
			return -1;
	}
	if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
		j->p++, *integral = 0;
		if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
			j->p++;
		if (j_digits(j) != 0)
			return -1;
	}
	return 0;
}

static int j_literal(struct json *j, const char *lit)
{
	size_t n = strlen(lit);
	if ((size_t)(j->end - j->p) < n || memcmp(j->p, lit, n) != 0)
		return j_fail(j, "invalid character in literal");
	j->p += n;
	return 0;
}

static int j_value(struct json *j);

/* j_object walks an object at j->p, calling field for each key (decoded)
 * with j->p at its value; field must consume the value. */
static int j_object(struct json *j, int (*field)(struct json *, const char *, size_t, void *), void *ctx)
{
	if (++j->depth > JSON_MAX_DEPTH)
		return j_fail(j, "exceeded max depth");
	j->p++;
	j_ws(j);
	if (j->p < j->end && *j->p == '}') {
		j->p++, j->depth--;
		return 0;
	}
	struct buf key = {0};
	for (;;) {
		j_ws(j);
		if (j->p >= j->end || *j->p != '"') {
			buf_free(&key);
			return j_fail(j, j->p >= j->end ? "unexpected end of JSON input" : "invalid character looking for beginning of object key string");
		}
		key.len = 0;
		if (j_string(j, &key) != 0)
			goto bad;
		j_ws(j);
		if (j->p >= j->end || *j->p != ':') {
			j_fail(j, j->p >= j->end ? "unexpected end of JSON input" : "invalid character after object key");
			goto bad;
		}
		j->p++;
		j_ws(j);
		if ((field ? field(j, key.p ? key.p : "", key.len, ctx) : j_value(j)) != 0)
			goto bad;
		j_ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			continue;
		}
		if (j->p < j->end && *j->p == '}') {
			j->p++, j->depth--;
			buf_free(&key);
			return 0;
		}
		j_fail(j, j->p >= j->end ? "unexpected end of JSON input" : "invalid character after object key:value pair");
		goto bad;
	}
bad:
	buf_free(&key);
	return -1;
}

/* j_value validates any value at j->p and skips it. */
static int j_value(struct json *j)
{
	j_ws(j);
	if (j->p >= j->end)
		return j_fail(j, "unexpected end of JSON input");
	int integral;
	switch (*j->p) {
	case '{':
		return j_object(j, NULL, NULL);
	case '[':
		if (++j->depth > JSON_MAX_DEPTH)
			return j_fail(j, "exceeded max depth");
		j->p++;
		j_ws(j);
		if (j->p < j->end && *j->p == ']') {
			j->p++, j->depth--;
			return 0;
		}
		for (;;) {
			if (j_value(j) != 0)
				return -1;
			j_ws(j);
			if (j->p < j->end && *j->p == ',') {
				j->p++;
				continue;
			}
			if (j->p < j->end && *j->p == ']') {
				j->p++, j->depth--;
				return 0;
			}
			return j_fail(j, j->p >= j->end ? "unexpected end of JSON input" : "invalid character after array element");
		}
	case '"':
		return j_string(j, NULL);
	case 't':
		return j_literal(j, "true");
	case 'f':
		return j_literal(j, "false");
	case 'n':
		return j_literal(j, "null");
	default:
		if (*j->p == '-' || (*j->p >= '0' && *j->p <= '9'))
			return j_number(j, &integral);
		return j_fail(j, "invalid character looking for beginning of value");
	}
}

/* j_null consumes a null at j->p when there is one. */
static int j_null(struct json *j)
{
	if (j->p < j->end && *j->p == 'n') {
		j_literal(j, "null");
		return 1;
	}
	return 0;
}

/* opt_string is a string field: NULL while absent or null. */
struct opt_string {
	int set;
	struct buf s;
};

/* j_into_string decodes a string or null into s (a type mismatch is an
 * error, as encoding/json reports it). */
static int j_into_string(struct json *j, struct opt_string *s)
{
	if (j_null(j))
		return j->why->len ? -1 : 0; /* null leaves a string as it was */
	if (j->p >= j->end || *j->p != '"') {
		if (j_value(j) != 0)
			return -1;
		return j_fail(j, "cannot unmarshal into a string");
	}
	s->s.len = 0;
	s->set = 1;
	return j_string(j, &s->s);
}

/* The gateway's JSON error body and an error frame's object. */
struct resp_error {
	int set;
	struct opt_string code, message, rule, id;
};

struct result {
	int set, has_code;
	int64_t code;
	struct opt_string error;
};

struct frame {
	int has_stdout, has_stderr;
	struct buf out, err; /* decoded */
	struct result result;
	struct resp_error error;
};

static void opt_free(struct opt_string *s) { buf_free(&s->s); }
static void error_free(struct resp_error *e)
{
	opt_free(&e->code), opt_free(&e->message), opt_free(&e->rule), opt_free(&e->id);
}

/* key_is matches a key as encoding/json does, ASCII case folded. */
static int key_is(const char *k, size_t n, const char *name) { return equal_fold(k, n, name); }

static int error_field(struct json *j, const char *k, size_t n, void *ctx)
{
	struct resp_error *e = ctx;
	if (key_is(k, n, "code")) return j_into_string(j, &e->code);
	if (key_is(k, n, "message")) return j_into_string(j, &e->message);
	if (key_is(k, n, "rule")) return j_into_string(j, &e->rule);
	if (key_is(k, n, "id")) return j_into_string(j, &e->id);
	return j_value(j);
}

/* j_into_error decodes an error object or null (null: none). An object
 * decodes into the one there (encoding/json fills a set pointer). */
static int j_into_error(struct json *j, struct resp_error *e)
{
	if (j_null(j)) {
		e->set = 0;
		return j->why->len ? -1 : 0;
	}
	if (j->p >= j->end || *j->p != '{') {
		if (j_value(j) != 0)
			return -1;
		return j_fail(j, "cannot unmarshal into the error object");
	}
	if (!e->set) {
		error_free(e);
		memset(e, 0, sizeof *e);
		e->set = 1;
	}
	return j_object(j, error_field, e);
}

static int result_field(struct json *j, const char *k, size_t n, void *ctx)
{
	struct result *r = ctx;
	if (key_is(k, n, "exitCode")) {
		if (j_null(j)) {
			r->has_code = 0;
			return j->why->len ? -1 : 0;
		}
		const char *s = j->p;
		int integral;
		if (j->p >= j->end || !(*j->p == '-' || (*j->p >= '0' && *j->p <= '9'))) {
			if (j_value(j) != 0)
				return -1;
			return j_fail(j, "cannot unmarshal into an exit code");
		}
		if (j_number(j, &integral) != 0)
			return -1;
		if (!integral || parse_int(s, (size_t)(j->p - s), 10, &r->code) != 0)
			return j_fail(j, "cannot unmarshal number into an exit code");
		r->has_code = 1;
		return 0;
	}
	if (key_is(k, n, "error"))
		return j_into_string(j, &r->error);
	return j_value(j);
}

/* j_base64 decodes a JSON string of standard base64 (padded; CR and LF
 * ignored, as encoding/json's []byte decoding does) into out. */
static int j_base64(struct json *j, struct buf *out)
{
	struct buf s = {0};
	if (j_string(j, &s) != 0) {
		buf_free(&s);
		return -1;
	}
	out->len = 0;
	buf_grow(out, s.len / 4 * 3 + 3);
	uint32_t v = 0;
	int n = 0, pad = 0;
	for (size_t i = 0; i < s.len; i++) {
		char c = s.p[i];
		int d;
		if (c == '\r' || c == '\n')
			continue;
		if (c == '=') {
			if (n < 2 || pad + n >= 4) goto bad;
			pad++;
			if (n + pad == 4) {
				v <<= 6 * pad;
				out->p[out->len++] = (char)(v >> 16);
				if (n == 3)
					out->p[out->len++] = (char)(v >> 8);
				n = 0;
				/* only CR/LF may follow the padding */
				for (i++; i < s.len; i++)
					if (s.p[i] != '\r' && s.p[i] != '\n')
						goto bad;
				break;
			}
			continue;
		}
		if (pad) goto bad;
		if (c >= 'A' && c <= 'Z') d = c - 'A';
		else if (c >= 'a' && c <= 'z') d = c - 'a' + 26;
		else if (c >= '0' && c <= '9') d = c - '0' + 52;
		else if (c == '+') d = 62;
		else if (c == '/') d = 63;
		else goto bad;
		v = v << 6 | (uint32_t)d;
		if (++n == 4) {
			out->p[out->len++] = (char)(v >> 16);
			out->p[out->len++] = (char)(v >> 8);
			out->p[out->len++] = (char)v;
			n = 0, v = 0;
		}
	}
	if (n != 0) /* a quantum cut short */
		goto bad;
	buf_free(&s);
	return 0;
bad:
	buf_free(&s);
	return j_fail(j, "illegal base64 data");
}

static int j_into_bytes(struct json *j, int *has, struct buf *b)
{
	if (j_null(j)) {
		*has = 0;
		return j->why->len ? -1 : 0;
	}
	if (j->p >= j->end || *j->p != '"') {
		if (j_value(j) != 0)
			return -1;
		return j_fail(j, "cannot unmarshal into []byte");
	}
	*has = 1;
	return j_base64(j, b);
}

static int frame_field(struct json *j, const char *k, size_t n, void *ctx)
{
	struct frame *f = ctx;
	if (key_is(k, n, "stdout")) return j_into_bytes(j, &f->has_stdout, &f->out);
	if (key_is(k, n, "stderr")) return j_into_bytes(j, &f->has_stderr, &f->err);
	if (key_is(k, n, "error")) return j_into_error(j, &f->error);
	if (key_is(k, n, "result")) {
		if (j_null(j)) {
			f->result.set = 0;
			return j->why->len ? -1 : 0;
		}
		if (j->p >= j->end || *j->p != '{') {
			if (j_value(j) != 0)
				return -1;
			return j_fail(j, "cannot unmarshal into the result object");
		}
		if (!f->result.set) {
			opt_free(&f->result.error);
			memset(&f->result, 0, sizeof f->result);
			f->result.set = 1;
		}
		return j_object(j, result_field, &f->result);
	}
	return j_value(j);
}

static int body_error_field(struct json *j, const char *k, size_t n, void *ctx)
{
	if (key_is(k, n, "error"))
		return j_into_error(j, ctx);
	return j_value(j);
}

/* j_document decodes one whole JSON document as an object with field,
 * a top-level null being no fields, as encoding/json does into a struct. */
static int j_document(const char *p, size_t n, int (*field)(struct json *, const char *, size_t, void *), void *ctx, struct buf *why)
{
	struct json j = {.p = p, .end = p + n, .why = why};
	j_ws(&j);
	if (j.p >= j.end)
		return j_fail(&j, "unexpected end of JSON input");
	if (*j.p == '{') {
		if (j_object(&j, field, ctx) != 0)
			return -1;
	} else if (j_null(&j)) {
		if (why->len)
			return -1;
	} else {
		if (j_value(&j) != 0)
			return -1;
		j_fail(&j, "cannot unmarshal into a frame");
		/* encoding/json reports a syntax error after the value first */
	}
	j_ws(&j);
	if (j.p < j.end) {
		why->len = 0;
		return j_fail(&j, "invalid character after top-level value");
	}
	return why->len ? -1 : 0;
}

/* ---- the answer ---- */

static void print_error(int fd, struct resp_error *e)
{
	struct buf m = {0};
	struct buf *parts[] = {&e->code.s, &e->message.s, &e->rule.s, &e->id.s};
	for (size_t i = 0; i < 4; i++)
		buf_addc(parts[i], 0), parts[i]->len--; /* NUL-terminated for %s */
	int rule = e->rule.set && e->rule.s.len, id = style->audit_id && e->id.set && e->id.s.len;
	if (rule && id)
		buf_printf(&m, "%s%s (%s; audit id %s): %s\n", style->prefix, e->code.s.p, e->rule.s.p, e->id.s.p, e->message.s.p);
	else if (rule)
		buf_printf(&m, "%s%s (%s): %s\n", style->prefix, e->code.s.p, e->rule.s.p, e->message.s.p);
	else
		buf_printf(&m, "%s%s: %s\n", style->prefix, e->code.s.p, e->message.s.p);
	say(fd, &m);
}

/* error_answer handles an answer other than 200: the gateway's JSON error,
 * or the body as it came. */
static int error_answer(struct reader *r, int64_t status, int err_fd)
{
	struct buf body = {0}, why = {0}, m = {0};
	struct resp_error e = {0};
	char tmp[4096];
	int code;
	while (body.len < ERROR_BODY_MAX) {
		size_t want = ERROR_BODY_MAX - body.len < sizeof tmp ? ERROR_BODY_MAX - body.len : sizeof tmp;
		long k = body_read(r, tmp, want);
		if (k <= 0)
			break;
		buf_add(&body, tmp, (size_t)k);
	}
	if (j_document(body.p ? body.p : "", body.len, body_error_field, &e, &why) != 0 || !e.set) {
		const char *t = body.p ? body.p : "";
		size_t tn = body.len;
		trim(&t, &tn);
		buf_printf(&m, "%sgateway answered %lld: ", style->prefix, (long long)status);
		buf_add(&m, t, tn);
		buf_addc(&m, '\n');
		say(err_fd, &m);
		code = style->refused(status, NULL);
	} else {
		print_error(err_fd, &e);
		code = style->refused(status, &e.code.s);
	}
	error_free(&e);
	buf_free(&body), buf_free(&why);
	return code;
}

static int lost(int err_fd, const char *fmt, const char *detail)
{
	struct buf m = {0};
	buf_printf(&m, fmt, style->prefix, detail);
	say(err_fd, &m);
	return style->lost;
}
/* frame_line reads the next line of the body, newline included, into
 * line; -1 when the body ends or fails first. Lines have no bound: the
 * gateway's frames are bounded by the gateway. */
static int frame_line(struct reader *r, struct buf *line)
{
	size_t scanned = 0;
	buf_grow(&r->pend, 4096);
	for (;;) {
		char *s = r->pend.p + r->off;
		size_t avail = r->pend.len - r->off;
		char *nl = avail > scanned ? memchr(s + scanned, '\n', avail - scanned) : NULL;
		if (nl) {
			size_t n = (size_t)(nl + 1 - s);
			line->len = 0;
			buf_add(line, s, n);
			r->off += n;
			return 0;
		}
		scanned = avail;
		if (r->off > 0) { /* keep only what is not yet a line */
			memmove(r->pend.p, s, avail);
			r->pend.len = avail;
			r->off = 0;
		}
		buf_grow(&r->pend, r->pend.cap / 2 > 4096 ? r->pend.cap / 2 : 4096);
		long k = body_read(r, r->pend.p + r->pend.len, r->pend.cap - r->pend.len);
		if (k <= 0)
			return -1;
		r->pend.len += (size_t)k;
	}
}

/* read_response reads the gateway's answer from src, writes the call's
 * output to out_fd and err_fd, and returns the exit code. */
static int read_response(struct source *src, int out_fd, int err_fd)
{
	/* Static, not on the heap: a heap block this size is an mmap and an
	 * munmap per call. */
	static struct reader rd;
	struct reader *r = &rd;
	memset(r, 0, offsetof(struct reader, buf));
	r->src = src;
	struct buf why = {0}, line = {0}, m = {0};
	struct frame f = {0};
	int64_t status;
	int code;
	if (read_head(r, &status, &why) != 0) {
		buf_addc(&why, 0);
		code = lost(err_fd, "%sconnection to the gateway lost before it answered (gateway restarting?): %s\n", why.p);
		goto out;
	}
	if (status != 200) {
		code = error_answer(r, status, err_fd);
		goto out;
	}
	for (;;) {
		if (frame_line(r, &line) != 0) {
			if (r->err == RD_MSG) {
				buf_addc(&r->msg, 0);
				code = lost(err_fd, "%sreading from the gateway: %s\n", r->msg.p);
			} else if (r->err == RD_ERRNO && r->errnum != ECONNRESET) {
				code = lost(err_fd, "%sreading from the gateway: %s\n", errtext(r->errnum));
			} else {
				code = lost(err_fd, "%sconnection to the gateway lost mid-call (gateway restarting?); the call's outcome is unknown\n%s", "");
			}
			goto out;
		}
		f.has_stdout = f.has_stderr = 0;
		f.result.set = f.result.has_code = f.result.error.set = 0;
		f.result.error.s.len = 0;
		error_free(&f.error);
		memset(&f.error, 0, sizeof f.error);
		why.len = 0;
		if (j_document(line.p, line.len, frame_field, &f, &why) != 0) {
			buf_addc(&why, 0);
			buf_printf(&m, "%sbad frame from the gateway: %s\n", style->prefix, why.p);
			say(err_fd, &m);
			code = style->protocol;
			goto out;
		}
		if (f.has_stdout) {
			(void)write_all(out_fd, f.out.p, f.out.len, 0);
		} else if (f.has_stderr) {
			(void)write_all(err_fd, f.err.p, f.err.len, 0);
		} else if (f.error.set) {
			print_error(err_fd, &f.error);
			code = style->refused(0, &f.error.code.s);
			goto out;
		} else if (f.result.set) {
			struct opt_string *e = &f.result.error;
			if (e->set && e->s.len && (style->coded_errors || !f.result.has_code)) {
				buf_adds(&m, style->prefix);
				buf_add(&m, e->s.p, e->s.len);
				buf_addc(&m, '\n');
				say(err_fd, &m);
			}
			if (f.result.has_code) {
				if (f.result.code < 0 || f.result.code > 255) {
					buf_printf(&m, "%sbad exit code %lld from the gateway\n", style->prefix, (long long)f.result.code);
					say(err_fd, &m);
					code = style->protocol;
				} else {
					code = (int)f.result.code;
				}
			} else {
				code = e->set && e->s.len ? style->software : 0;
			}
			goto out;
		}
	}
out:
	buf_free(&why), buf_free(&line), buf_free(&f.out), buf_free(&f.err), buf_free(&r->msg), buf_free(&r->pend);
	opt_free(&f.result.error);
	error_free(&f.error);
	return code;
}
