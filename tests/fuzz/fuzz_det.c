/*
 * Determinism for the fuzz targets: the targets are linked with
 * -Wl,--wrap=getrandom,--wrap=clock_gettime (and fsync, fdatasync), so that
 * the project's code
 * (not libevent's or libc's own) gets a fixed clock and a byte stream that
 * starts over with every input. The same input then takes the same path.
 */
#include <sys/types.h>

#include <stdint.h>
#include <string.h>
#include <time.h>

ssize_t	__wrap_getrandom(void *, size_t, unsigned int);
int	__wrap_clock_gettime(clockid_t, struct timespec *);
void	fuzz_det_reset(void);
void	fuzz_det_seed(const uint8_t *, size_t);

static uint64_t	fuzz_det_state;

/* Start the byte stream over: call at the start of each input. */
void
fuzz_det_reset(void)
{
	fuzz_det_state = 0x6867666666757a7aULL;
}

/*
 * Start the byte stream from a seed drawn from the input (FNV-1a): where a
 * target checks that what it makes now differs from what the input holds,
 * the fuzzer, which sees the values compared, cannot copy them into the
 * input, since that changes them.
 */
void
fuzz_det_seed(const uint8_t *data, size_t len)
{
	uint64_t	h = 0xcbf29ce484222325ULL;
	size_t		i;

	for (i = 0; i < len; i++)
		h = (h ^ data[i]) * 0x100000001b3ULL;
	fuzz_det_state = h;
}

/* getrandom: splitmix64 from a fixed seed. */
ssize_t
__wrap_getrandom(void *buf, size_t len, unsigned int flags)
{
	unsigned char	*p = buf;
	uint64_t	 z;
	size_t		 i;

	for (i = 0; i < len; i++) {
		if (i % 8 == 0) {
			z = (fuzz_det_state += 0x9e3779b97f4a7c15ULL);
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
			z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
			z ^= z >> 31;
		}
		p[i] = (unsigned char)(z >> (8 * (i % 8)));
	}
	return (ssize_t)len;
}

/* Every clock stands still: 2026-01-01 00:00:00 UTC, 1000 s of uptime. */
int
__wrap_clock_gettime(clockid_t id, struct timespec *ts)
{
	ts->tv_sec = id == CLOCK_REALTIME ? 1767225600 : 1000;
	ts->tv_nsec = 0;
	return 0;
}

int	__wrap_fsync(int);
int	__wrap_fdatasync(int);

/*
 * fsync and fdatasync do nothing: durability is not what the targets test,
 * and a disk flush per record would make them a hundred times slower.
 */
int
__wrap_fsync(int fd)
{
	return fd >= 0 ? 0 : -1;
}

int
__wrap_fdatasync(int fd)
{
	return fd >= 0 ? 0 : -1;
}
