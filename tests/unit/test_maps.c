/*
 * One daemon's handler maps against the protocol table (common/proto.c):
 * built once per daemon (MAPS_brokerd, MAPS_sandboxd, MAPS_frontd,
 * MAPS_egressd) from that daemon's own objects, so that the maps checked
 * are the real ones.
 * Every type a map handles is one its peer sends it, every such type has
 * a handler; the daemons would refuse to start otherwise.
 */
#include <sys/types.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common.h"

/* A map matches what self receives from expect. */
static void
check_map(const struct ipc_handler *map, unsigned self, unsigned expect)
{
	char	err[256] = "";

	if (ipc_handlers_match(proto_msgs, map, self, expect, err,
	    sizeof(err)) == -1)
		fail_msg("%s", err);
}

#ifdef MAPS_brokerd
static void
test_brokerd_maps(void **state)
{
	check_map(front_handler_map(), ROLE_BROKERD, ROLE_FRONTD);
	check_map(control_handlers, ROLE_BROKERD, ROLE_HGCTL);
	check_map(sandbox_handlers, ROLE_BROKERD, ROLE_SANDBOXD);
}
#endif

#ifdef MAPS_sandboxd
static void
test_sandboxd_maps(void **state)
{
	check_map(broker_handlers, ROLE_SANDBOXD, ROLE_BROKERD);
}
#endif

#ifdef MAPS_egressd
static void
test_egressd_maps(void **state)
{
	check_map(egressd_handlers, ROLE_EGRESSD, ROLE_SANDBOXD);
}
#endif

#ifdef MAPS_frontd
static void
test_frontd_maps(void **state)
{
	check_map(frontd_handlers, ROLE_FRONTD, ROLE_BROKERD);
}
#endif

int
main(void)
{
	const struct CMUnitTest tests[] = {
#ifdef MAPS_brokerd
		cmocka_unit_test(test_brokerd_maps),
#endif
#ifdef MAPS_sandboxd
		cmocka_unit_test(test_sandboxd_maps),
#endif
#ifdef MAPS_frontd
		cmocka_unit_test(test_frontd_maps),
#endif
#ifdef MAPS_egressd
		cmocka_unit_test(test_egressd_maps),
#endif
	};

	log_init("test_maps", 1);
	log_setlevel(LOG_LVL_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
