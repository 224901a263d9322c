/*
 * The arithmetic of direct-mode deadlines, kept pure so that it can be
 * tested alone: a grant runs on the monotonic clock, is stored as a wall
 * deadline, and is resumed after a restart from what is left of it.
 */
#include <sys/types.h>

#include "brokerd.h"

/* A new grant of ttl seconds: both deadlines, from the two clocks now. */
void
ttl_grant(int64_t now_wall, int64_t now_mono, int ttl, int64_t *wall,
    int64_t *mono)
{
	*wall = now_wall + (int64_t)ttl * 1000;
	*mono = now_mono + (int64_t)ttl * 1000;
}

/*
 * After a restart: the monotonic deadline of a stored wall deadline, or
 * -1 when it has passed. A restart neither extends a grant (what is left
 * is the stored deadline minus now) nor loses it.
 */
int
ttl_resume(int64_t stored_wall, int64_t now_wall, int64_t now_mono,
    int64_t *mono)
{
	int64_t	left = stored_wall - now_wall;

	if (stored_wall <= 0 || left <= 0)
		return -1;
	*mono = now_mono + left;
	return 0;
}

/* Whole seconds left until a monotonic deadline, rounded up; 0 if past. */
int64_t
ttl_remaining(int64_t mono_deadline, int64_t now_mono)
{
	int64_t	left = mono_deadline - now_mono;

	return left <= 0 ? 0 : (left + 999) / 1000;
}

/*
 * When to warn (mode_expiring): warn_secs before the deadline, or at once
 * when less than that is left. Milliseconds from now.
 */
int64_t
ttl_warn_in(int64_t mono_deadline, int64_t now_mono, int warn_secs)
{
	int64_t	at = mono_deadline - (int64_t)warn_secs * 1000 - now_mono;

	return at < 0 ? 0 : at;
}
