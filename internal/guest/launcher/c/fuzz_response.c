/*
 * libFuzzer target for the one parser of outside input in client.c, which
 * the launcher and the CLI's front share: the gateway's answer (status
 * line, headers, chunked body, NDJSON frames, the JSON error body). Whatever arrives, read_response returns an exit code
 * 0-255, without a crash, a leak or undefined behaviour. The first input
 * byte sets the size of each read, so refills land everywhere.
 * internal/guest/launcher's TestFuzzResponse builds and runs it for a bounded time:
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined fuzz_response.c
 */
#define TOOLGATE_FUZZ
#include "launch.c"


static long mem_read(struct source *s, char *p, size_t n)
{
	size_t k = s->memlen < n ? s->memlen : n;
	if (k > (size_t)s->fd)
		k = (size_t)s->fd;
	memcpy(p, s->mem, k);
	s->mem += k;
	s->memlen -= k;
	return (long)k;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	static int devnull = -1;
	if (devnull < 0 && (devnull = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0)
		abort();
	use_launcher_style("t");
	if (size == 0)
		return 0;
	struct source s = {.read = mem_read, .fd = data[0] ? data[0] : 4096, .mem = (const char *)data + 1, .memlen = size - 1};
	int code = read_response(&s, devnull, devnull);
	if (code < 0 || code > 255)
		abort();
	return 0;
}
