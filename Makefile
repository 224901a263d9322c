# hostgate: four privilege-separated daemons and an ops CLI.
#   make            build everything into build/
#   make run        start hostgate on its embedded defaults (scripts/run.sh)
#   make fleet      three hostgates on PostgreSQL behind HAProxy (fleet-stop)
#   make check      build, unit, docs, fuzz (15 s a target), system, browser
#                   and VM tests, with the time of each
#   make install    PREFIX=/usr/local DESTDIR=
#   make deb        build/deb/hostgate_VERSION_ARCH.deb (DEB_VERSION=)
#   make vm         the package booted under systemd in qemu (tests/vm/)
#   make check SANITIZE=address,undefined
#   make HG_DEBUG=0 without the check of each outgoing message against the
#                   protocol table (the package's build, into build-release)
#   make fuzz       libFuzzer campaign (clang): FUZZ_SECONDS=, FUZZ_JOBS=
#   make bench      benchmarks (tests/bench/)

PREFIX	?= /usr/local
DESTDIR	?=
# The installed layout (docs/operations.md). The state, run and
# configuration paths below are compiled in as the daemons' defaults.
SYSCONFDIR	?= /etc
LOCALSTATEDIR	?= /var
RUNSTATEDIR	?= /run
BINDIR		?= $(PREFIX)/bin
SBINDIR		?= $(PREFIX)/sbin
PKGDATADIR	?= $(PREFIX)/share/hostgate
MANDIR		?= $(PREFIX)/share/man
UNITDIR		?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR	?= $(PREFIX)/lib/sysusers.d
TMPFILESDIR	?= $(PREFIX)/lib/tmpfiles.d
MODULESLOADDIR	?= $(PREFIX)/lib/modules-load.d
STATEDIR	 = $(LOCALSTATEDIR)/lib/hostgate
RUNDIR		 = $(RUNSTATEDIR)/hostgate
ENVFILE		 = $(SYSCONFDIR)/hostgate/hostgate.env
CC	?= cc
B	 = build
PKGS	 = libevent libevent_openssl json-c libseccomp libcap openssl libargon2 libsystemd \
	   sqlite3 libpq

# The Debian packages the goals need (scripts/deps.sh's lists). Building
# never installs: make, make install and make deb stop naming the
# apt-get line when one is missing. make run, make check and make bench
# install what they need, and only that. Checked once, by the first make:
# the makes it runs skip it (HG_DEPS_CHECKED).
GOALS	 = $(or $(MAKECMDGOALS),all)
DEPS_LISTS = $(strip \
	$(if $(filter-out clean fleet-stop,$(GOALS)),build) \
	$(if $(filter run system browser fleet bench check,$(GOALS)),runtime) \
	$(if $(filter unit system fuzz fuzz-build fuzz-check build-check \
	    check,$(GOALS)),test) \
	$(if $(filter browser check,$(GOALS)),browser) \
	$(if $(filter system browser fleet check,$(GOALS)),fleet) \
	$(if $(filter bench,$(GOALS)),bench) \
	$(if $(and $(filter bench,$(GOALS)),$(filter fleet,$(BENCH_ONLY))),fleet) \
	$(if $(filter deb vm build-check check,$(GOALS)),deb) \
	$(if $(filter vm check,$(GOALS)),vm))
DEPS_HOW = $(if $(filter run check bench,$(GOALS)),--install,--check)
ifeq ($(HG_DEPS_CHECKED)$(if $(DEPS_LISTS),,none),)
DEPS_MISSING := $(shell scripts/deps.sh $(DEPS_HOW) $(DEPS_LISTS) >&2 || \
	echo missing)
ifneq ($(DEPS_MISSING),)
$(error missing Debian packages, see the message above)
endif
export HG_DEPS_CHECKED = 1
endif

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   := $(shell pkg-config --libs $(PKGS)) -lwslay

CFLAGS	?= -O2 -g
CFLAGS	+= -std=gnu11 -Wall -Wextra -Werror -Wshadow -Wpointer-arith \
	   -Wmissing-prototypes -Wno-unused-parameter -Wno-format-truncation \
	   -fstack-protector-strong -D_FORTIFY_SOURCE=2 -fPIE \
	   -fno-strict-aliasing -D_GNU_SOURCE -Icommon -I$(B) $(PKG_CFLAGS)
# --as-needed: each binary depends on the libraries it calls only.
LDFLAGS	+= -pie -Wl,-z,relro,-z,now -Wl,-z,noexecstack -Wl,--as-needed

# HG_DEBUG=1, the default (make, make unit, make system, make check): each
# outgoing message is checked against its row of the protocol table, and
# one that does not match aborts its daemon with a log line (common/ipc.c).
# The package is built with HG_DEBUG=0 (debian/rules), into build-release.
HG_DEBUG ?= 1
ifeq ($(HG_DEBUG),1)
CFLAGS	+= -DHG_DEBUG=1
else
B	 = build-release
endif

ifneq ($(SANITIZE),)
CFLAGS	+= -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -DHG_SANITIZE=1 -O1
LDFLAGS	+= -fsanitize=$(SANITIZE)
B	 = build-san
endif

# The paths compiled in as the defaults (common/config.c): $(B)/paths.h,
# rewritten only when one of them changes, so that changing PREFIX (or
# another path variable) between make and make install rebuilds what
# includes it (the compiler's -MMD dependencies), and nothing else.
PATHS_H	 = $(B)/paths.h
PATHS_ERR := $(shell scripts/paths.sh $(PATHS_H) \
	'HG_PROFILES_DIR=$(PKGDATADIR)/profiles' 'HG_WEB_DIR=$(PKGDATADIR)/web' \
	'HG_STATE_DIR=$(STATEDIR)' 'HG_RUN_DIR=$(RUNDIR)' \
	'HG_ENV_FILE=$(ENVFILE)' 2>&1 || echo failed)
ifneq ($(PATHS_ERR),)
$(error $(PATHS_H): $(PATHS_ERR))
endif

COMMON	= log config ipc proto priv util proc egress jail
FRONTD	= frontd http api tls ws static sse files mcp mcp_stream \
	  mcp_tools
BROKERD	= brokerd front control sandbox auth session ratelimit spawn \
	  mode events admin prompt audit ttl recording store store_sqlite \
	  store_pg files egress pg audit_pg hosts home
SANDBOXD= sandboxd broker backend argv backend_bwrap backend_docker backend_macos \
	  backend_wsl spawn spawner policy cgroup grant ids record \
	  workspace disk fileops files egress passwd
EGRESSD	= egressd proxy request hosts sandbox
HGCTL	= hgctl pg storeadm audit

O	 = $(B)/obj
COMMON_O   = $(COMMON:%=$(O)/common/%.o)
FRONTD_O   = $(FRONTD:%=$(O)/frontd/%.o)
BROKERD_O  = $(BROKERD:%=$(O)/brokerd/%.o)
SANDBOXD_O = $(SANDBOXD:%=$(O)/sandboxd/%.o)
EGRESSD_O  = $(EGRESSD:%=$(O)/egressd/%.o)
HGCTL_O    = $(HGCTL:%=$(O)/brokerd/%.o)

BINS	= $(B)/frontd $(B)/brokerd $(B)/sandboxd $(B)/egressd $(B)/hgctl

UNIT	= test_log test_config test_ipc test_util test_http test_auth \
	  test_session test_ratelimit test_macos test_wsl test_backend \
	  test_policy test_ttl test_audit test_cgroup test_workspace \
	  test_proto test_maps_brokerd test_maps_sandboxd test_maps_frontd \
	  test_maps_egressd test_fileops test_egress test_egressd test_storeadm \
	  test_store test_home
UNIT_BINS = $(UNIT:%=$(B)/tests/%)

all: $(BINS) web

# The web panel: frontd/web -> frontd/web/dist, rebuilt when its sources change.
web:
	@scripts/web.sh

# V=1 shows the whole command lines.
Q	 = $(if $(V),,@)

$(O)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

$(B)/frontd: $(FRONTD_O) $(COMMON_O)
$(B)/brokerd: $(BROKERD_O) $(COMMON_O)
$(B)/sandboxd: $(SANDBOXD_O) $(COMMON_O)
$(B)/egressd: $(EGRESSD_O) $(COMMON_O)
$(B)/hgctl: $(HGCTL_O) $(COMMON_O)
$(BINS):
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

# The allowlist profiles' bridge, run inside the sandbox: libc alone.
all: $(B)/hg-egress-bridge
$(B)/hg-egress-bridge: $(O)/sandboxd/bridge.o
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^

# Unit tests: tests/unit/test_X.c links the module it tests and common/.
$(B)/tests/test_log: $(O)/tests/unit/test_log.o $(COMMON_O)
$(B)/tests/test_config: $(O)/tests/unit/test_config.o $(COMMON_O)
$(B)/tests/test_ipc: $(O)/tests/unit/test_ipc.o $(COMMON_O)
$(B)/tests/test_util: $(O)/tests/unit/test_util.o $(COMMON_O)
$(B)/tests/test_egress: $(O)/tests/unit/test_egress.o $(COMMON_O)
$(B)/tests/test_http: $(O)/tests/unit/test_http.o $(O)/frontd/http.o $(O)/frontd/tls.o $(COMMON_O)
# auth.c and session.c reach their store through store.c's ops.
STORE_O	= $(O)/brokerd/store.o $(O)/brokerd/store_sqlite.o \
	  $(O)/brokerd/store_pg.o $(O)/brokerd/pg.o $(O)/brokerd/audit_pg.o \
	  $(O)/brokerd/audit.o \
	  $(O)/brokerd/ttl.o $(O)/brokerd/events.o $(O)/brokerd/home.o
$(B)/tests/test_auth: $(O)/tests/unit/test_auth.o $(O)/brokerd/auth.o \
	$(O)/brokerd/session.o $(STORE_O) $(COMMON_O)
$(B)/tests/test_session: $(O)/tests/unit/test_session.o $(O)/brokerd/session.o \
	$(STORE_O) $(COMMON_O)
$(B)/tests/test_storeadm: $(O)/tests/unit/test_storeadm.o \
	$(O)/brokerd/storeadm.o $(O)/brokerd/session.o $(STORE_O) $(COMMON_O)
$(B)/tests/test_store: $(O)/tests/unit/test_store.o $(STORE_O) $(COMMON_O)
$(B)/tests/test_ratelimit: $(O)/tests/unit/test_ratelimit.o $(O)/brokerd/ratelimit.o \
	$(STORE_O) $(COMMON_O)
$(B)/tests/test_macos: $(O)/tests/unit/test_macos.o $(O)/tests/unit/sbpl_check.o \
	$(O)/tests/unit/golden.o $(O)/sandboxd/backend_macos.o \
	$(O)/sandboxd/argv.o $(COMMON_O)
$(B)/tests/test_wsl: $(O)/tests/unit/test_wsl.o $(O)/tests/unit/golden.o \
	$(O)/sandboxd/backend_wsl.o $(O)/sandboxd/argv.o $(COMMON_O)
$(B)/tests/test_policy: $(O)/tests/unit/test_policy.o $(O)/sandboxd/policy.o \
	$(COMMON_O)
$(B)/tests/test_audit: $(O)/tests/unit/test_audit.o $(O)/brokerd/audit.o \
	$(COMMON_O)
$(B)/tests/test_cgroup: $(O)/tests/unit/test_cgroup.o $(O)/sandboxd/cgroup.o \
	$(O)/sandboxd/ids.o $(COMMON_O)
$(B)/tests/test_ttl: $(O)/tests/unit/test_ttl.o $(O)/brokerd/ttl.o $(COMMON_O)
$(B)/tests/test_home: $(O)/tests/unit/test_home.o $(O)/brokerd/home.o $(COMMON_O)
$(B)/tests/test_backend: $(O)/tests/unit/test_backend.o \
	$(O)/tests/unit/golden.o $(O)/sandboxd/backend_bwrap.o \
	$(O)/sandboxd/backend_docker.o $(O)/sandboxd/argv.o \
	$(O)/sandboxd/passwd.o $(COMMON_O)
$(B)/tests/test_workspace: $(O)/tests/unit/test_workspace.o \
	$(O)/sandboxd/workspace.o $(O)/sandboxd/disk.o $(COMMON_O)
$(B)/tests/test_proto: $(O)/tests/unit/test_proto.o $(COMMON_O)
$(B)/tests/test_fileops: $(O)/tests/unit/test_fileops.o \
	$(O)/sandboxd/fileops.o $(COMMON_O)
$(B)/tests/test_egressd: $(O)/tests/unit/test_egressd.o \
	$(O)/egressd/request.o $(O)/egressd/hosts.o $(COMMON_O)
# Each daemon's handler maps against the protocol table: its objects but
# main (frontd's map is in frontd.c: built again with main renamed).
$(O)/tests/unit/test_maps_%.o: tests/unit/test_maps.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $< ($*)")
	$(Q)$(CC) $(CFLAGS) -DMAPS_$*=1 -MMD -MP -c -o $@ $<
$(O)/tests/frontd_nomain.o: frontd/frontd.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -Wno-missing-prototypes -Dmain=frontd_main \
	    -MMD -MP -c -o $@ $<
$(B)/tests/test_maps_brokerd: $(O)/tests/unit/test_maps_brokerd.o \
	$(filter-out $(O)/brokerd/brokerd.o,$(BROKERD_O)) $(COMMON_O)
$(B)/tests/test_maps_sandboxd: $(O)/tests/unit/test_maps_sandboxd.o \
	$(filter-out $(O)/sandboxd/sandboxd.o,$(SANDBOXD_O)) $(COMMON_O)
$(B)/tests/test_maps_egressd: $(O)/tests/unit/test_maps_egressd.o \
	$(filter-out $(O)/egressd/egressd.o,$(EGRESSD_O)) $(COMMON_O)
$(B)/tests/test_maps_frontd: $(O)/tests/unit/test_maps_frontd.o \
	$(O)/tests/frontd_nomain.o \
	$(filter-out $(O)/frontd/frontd.o,$(FRONTD_O)) $(COMMON_O)
$(UNIT_BINS):
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) -lcmocka

unit: $(UNIT_BINS)
	@for t in $(UNIT_BINS); do echo "== $$t"; $$t || exit 1; done

# The MCP clients test_mcp_sdk.py drives /mcp with (npm, cached in $(B)/mcp).
system: all
	@scripts/mcp-deps.sh $(B)/mcp >/dev/null
	HG_BUILD=$(B) tests/system/run.sh

browser: all
	HG_BUILD=$(B) tests/browser/run.sh

# Each phase a make of its own, timed (scripts/check.sh): the report
# says where the time went. The fuzzers run beside the system tests
# (system+fuzz-check: both at once, each output readable, each timed).
# The VM suite comes last.
CHECK_PHASES = all build-check unit protodoc-check docs-check \
	  system+fuzz-check browser vm
check:
	+@B=$(B) scripts/check.sh "$(MAKE)" $(CHECK_PHASES)

# The build's own tests (tests/build/): the paths follow PREFIX, a
# missing build dependency stops make install before it installs anything,
# and docs-check fails on a .c file or variable the pages lack.
build-check:
	@tests/build/run.sh

# docs/protocol.md's roles, message flags, error codes and message
# reference are generated from common/proto.c: protodoc rewrites them,
# protodoc-check compares (tests/build/test_protodoc.sh shows it fails
# when the page lacks an entry of the code).
$(B)/hg-protodoc: $(O)/scripts/protodoc.o $(COMMON_O)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

protodoc: $(B)/hg-protodoc
	scripts/protodoc.sh update $(B)

protodoc-check: $(B)/hg-protodoc
	scripts/protodoc.sh check $(B)

# docs/architecture.md's Code layout and docs/configuration.md's variables
# against the code: every .c file and every variable of common/config.c
# has its line (scripts/docs.sh; tests/build/test_docs.sh shows it fails).
$(B)/hg-docvars: $(O)/scripts/docvars.o $(COMMON_O)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

docs-check: $(B)/hg-docvars
	@scripts/docs.sh check $(B)

run: all
	HG_BUILD=$(B) scripts/run.sh

# A fleet on one machine (docs/fleet.md): PostgreSQL, three hostgates on
# it and HAProxy in front, in the background; fleet-stop stops them.
fleet: all
	HG_BUILD=$(B) scripts/fleet.sh start

fleet-stop:
	HG_BUILD=$(B) scripts/fleet.sh stop

.PHONY: fleet fleet-stop

# The installed paths, written into the units, man pages and env file.
SUBST	= sed -e 's|@SBINDIR@|$(SBINDIR)|g' -e 's|@BINDIR@|$(BINDIR)|g' \
	  -e 's|@STATEDIR@|$(STATEDIR)|g' -e 's|@RUNDIR@|$(RUNDIR)|g' \
	  -e 's|@ENVFILE@|$(ENVFILE)|g' -e 's|@PKGDATADIR@|$(PKGDATADIR)|g' \
	  -e 's|@VERSION@|$(HG_VERSION_STR)|g'
HG_VERSION_STR = $(shell sed -n 's/^\#define HG_VERSION[ \t]*"\(.*\)"/\1/p' common/common.h)
UNITS	= hostgate-frontd.service hostgate-brokerd.service hostgate-sandboxd.service \
	  hostgate-egressd.service
MAN5	= hostgate.env.5
MAN7	= hostgate.7
MAN8	= frontd.8 brokerd.8 sandboxd.8 egressd.8 hgctl.8 hg-egress-bridge.8

# The operator's configuration file, generated from .env.example: every
# variable commented out with its default, the paths the installed ones.
$(B)/hostgate.env: etc/hostgate.env.head .env.example Makefile $(PATHS_H)
	@mkdir -p $(dir $@)
	{ $(SUBST) etc/hostgate.env.head; sed -n '/^## /,$$p' .env.example | \
	  sed -e 's|^# HOSTGATE_STATE_DIR=.*|# HOSTGATE_STATE_DIR=$(STATEDIR)|' \
	      -e 's|^# HOSTGATE_RUN_DIR=.*|# HOSTGATE_RUN_DIR=$(RUNDIR)|' \
	      -e 's|^# HOSTGATE_PROFILES_DIR=.*|# HOSTGATE_PROFILES_DIR=$(PKGDATADIR)/profiles|' \
	      -e 's|^# HOSTGATE_WEB_DIR=.*|# HOSTGATE_WEB_DIR=$(PKGDATADIR)/web|'; \
	} > $@.tmp && mv $@.tmp $@

# Everything goes under DESTDIR; hostgate.env only when there is none, so
# that an operator's file is never overwritten (a reference copy of the
# defaults goes to PKGDATADIR/hostgate.env each time).
install: all $(B)/hostgate.env
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR) \
		$(DESTDIR)$(PKGDATADIR)/profiles $(DESTDIR)$(PKGDATADIR)/web \
		$(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) \
		$(DESTDIR)$(TMPFILESDIR) $(DESTDIR)$(MODULESLOADDIR) $(DESTDIR)$(SYSCONFDIR)/hostgate \
		$(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man7 \
		$(DESTDIR)$(MANDIR)/man8
	install -m 0755 $(B)/frontd $(B)/brokerd $(B)/sandboxd $(B)/egressd \
		$(DESTDIR)$(SBINDIR)/
	install -m 0755 $(B)/hg-egress-bridge $(DESTDIR)$(SBINDIR)/
	install -m 0755 $(B)/hgctl $(DESTDIR)$(BINDIR)/
	cp -R profiles/. $(DESTDIR)$(PKGDATADIR)/profiles/
	cp -R frontd/web/dist/. $(DESTDIR)$(PKGDATADIR)/web/
	for u in $(UNITS); do \
	  $(SUBST) systemd/$$u.in > $(DESTDIR)$(UNITDIR)/$$u && \
	  chmod 0644 $(DESTDIR)$(UNITDIR)/$$u || exit 1; done
	install -m 0644 systemd/hostgate.target $(DESTDIR)$(UNITDIR)/
	install -d $(DESTDIR)$(PKGDATADIR)/systemd
	install -m 0644 systemd/brokerd-store-tcp.conf $(DESTDIR)$(PKGDATADIR)/systemd/
	install -m 0644 systemd/hostgate.sysusers $(DESTDIR)$(SYSUSERSDIR)/hostgate.conf
	$(SUBST) systemd/hostgate.tmpfiles.in > $(DESTDIR)$(TMPFILESDIR)/hostgate.conf
	chmod 0644 $(DESTDIR)$(TMPFILESDIR)/hostgate.conf
	install -m 0644 systemd/hostgate.modules $(DESTDIR)$(MODULESLOADDIR)/hostgate.conf
	for m in $(MAN5) $(MAN7) $(MAN8); do \
	  $(SUBST) man/$$m > $(DESTDIR)$(MANDIR)/man$${m##*.}/$$m && \
	  chmod 0644 $(DESTDIR)$(MANDIR)/man$${m##*.}/$$m || exit 1; done
	install -m 0644 $(B)/hostgate.env $(DESTDIR)$(PKGDATADIR)/hostgate.env
	@if [ -e $(DESTDIR)$(ENVFILE) ]; then \
	  echo "install: keeping $(DESTDIR)$(ENVFILE); the defaults are in $(DESTDIR)$(PKGDATADIR)/hostgate.env"; \
	else \
	  echo "install -m 0644 $(B)/hostgate.env $(DESTDIR)$(ENVFILE)"; \
	  install -m 0644 $(B)/hostgate.env $(DESTDIR)$(ENVFILE); fi

# libFuzzer targets (tests/fuzz/README.md): built with clang into
# build-fuzz, objects once for all targets. `make fuzz` runs each for
# FUZZ_SECONDS (default 30), FUZZ_JOBS at a time (default 1), on a scratch
# corpus seeded from tests/fuzz/corpus/TARGET, and prints each target's
# execs and coverage; `make fuzz-check` (part of check) runs each 15 s, two
# at a time. A crash fails the run with its input saved and named.
FUZZ	= fuzz_http fuzz_config fuzz_policy fuzz_audit fuzz_ipc fuzz_api \
	  fuzz_ws fuzz_sse fuzz_static fuzz_session fuzz_auth fuzz_spawn \
	  fuzz_front fuzz_proto fuzz_mcp fuzz_egress
FZ	 = build-fuzz
FZ_O	 = $(FZ)/obj
FZ_CC	 = clang
FZ_SAN	 = -fsanitize=address,undefined -fno-sanitize-recover=undefined
FZ_CFLAGS = -std=gnu11 -g -O1 -fno-omit-frame-pointer $(FZ_SAN) \
	  -Werror=int-conversion -Werror=incompatible-pointer-types \
	  -Werror=implicit-function-declaration \
	  -fsanitize=fuzzer-no-link -D_GNU_SOURCE -Icommon -I$(B) $(PKG_CFLAGS)
FZ_COMMON = common/log.c common/util.c common/config.c common/egress.c \
	    tests/fuzz/fuzz_det.c
# A fixed clock and random stream, no disk flushes (fuzz_det.c).
FZ_WRAP	 = -Wl,--wrap=getrandom,--wrap=clock_gettime,--wrap=fsync,--wrap=fdatasync
FZ_FRONT  = tests/fuzz/front_harness.c common/proto.c frontd/http.c frontd/tls.c \
	  frontd/api.c frontd/ws.c frontd/sse.c frontd/static.c frontd/files.c \
	  frontd/mcp.c frontd/mcp_stream.c frontd/mcp_tools.c
FUZZ_SRC_fuzz_http    = frontd/http.c frontd/tls.c
FUZZ_SRC_fuzz_config  =
FUZZ_SRC_fuzz_policy  = sandboxd/policy.c
FUZZ_SRC_fuzz_audit   = brokerd/audit.c
FUZZ_SRC_fuzz_ipc     = common/ipc.c common/proto.c
FUZZ_SRC_fuzz_proto   = common/proto.c common/ipc.c
FUZZ_SRC_fuzz_api     = $(FZ_FRONT)
FUZZ_SRC_fuzz_ws      = $(FZ_FRONT)
FUZZ_SRC_fuzz_sse     = $(FZ_FRONT)
FUZZ_SRC_fuzz_static  = $(FZ_FRONT)
FUZZ_SRC_fuzz_mcp     = $(FZ_FRONT)
FUZZ_STORE_SRC	      = brokerd/store.c brokerd/store_sqlite.c brokerd/store_pg.c \
			brokerd/pg.c brokerd/audit_pg.c brokerd/audit.c \
			brokerd/events.c brokerd/ttl.c brokerd/home.c common/ipc.c \
			common/proto.c
FUZZ_SRC_fuzz_session = brokerd/session.c $(FUZZ_STORE_SRC) \
			tests/fuzz/fuzz_fixture.c
FUZZ_SRC_fuzz_auth    = brokerd/auth.c brokerd/session.c $(FUZZ_STORE_SRC) \
			tests/fuzz/fuzz_fixture.c
FUZZ_SRC_fuzz_egress  = egressd/request.c
# sandboxd whole but its main; what would touch the host is wrapped.
FZ_ALLCOMMON = $(filter-out $(FZ_COMMON),$(COMMON:%=common/%.c))
FUZZ_SRC_fuzz_spawn   = $(filter-out sandboxd/sandboxd.c,$(SANDBOXD:%=sandboxd/%.c)) \
	  $(FZ_ALLCOMMON) tests/fuzz/fuzz_fixture.c
FUZZ_WRAP_fuzz_spawn  = $(patsubst %,-Wl$(comma)--wrap=%,workspace_ensure \
	  backend_build spawn_start backend_probe backend_json cgroup_json \
	  cgroup_usage workspace_usage cgroup_session_kill cgroup_user_kill \
	  ids_per_user files_start)
# brokerd whole but its main, behind its frontd socket.
FUZZ_SRC_fuzz_front   = $(filter-out brokerd/brokerd.c,$(BROKERD:%=brokerd/%.c)) \
	  $(FZ_ALLCOMMON) tests/fuzz/fuzz_fixture.c
FUZZ_WRAP_fuzz_front  = $(patsubst %,-Wl$(comma)--wrap=%,auth_verify \
	  rl_take rl_peek)
comma	 = ,
FUZZ_BINS = $(FUZZ:%=$(FZ)/%)

$(FZ_O)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZCC  $<")
	$(Q)$(FZ_CC) $(FZ_CFLAGS) -MMD -MP -c -o $@ $<

define FZ_TARGET
$(FZ)/$(1): $(FZ_O)/tests/fuzz/$(1).o \
	$(patsubst %.c,$(FZ_O)/%.o,$(FUZZ_SRC_$(1)) $(FZ_COMMON))
endef
$(foreach t,$(FUZZ),$(eval $(call FZ_TARGET,$(t))))
$(FUZZ_BINS):
	@$(if $(Q),echo "  FUZZLD  $@")
	$(Q)$(FZ_CC) $(FZ_SAN) -fsanitize=fuzzer $(FZ_WRAP) \
	    $(FUZZ_WRAP_$(@F)) -o $@ $^ $(PKG_LIBS)

fuzz-build: $(FUZZ_BINS)

FUZZ_SECONDS ?= 30
FUZZ_JOBS    ?= 1
fuzz: fuzz-build
	@tests/fuzz/run.sh -t $(FUZZ_SECONDS) -j $(FUZZ_JOBS) $(FUZZ)

# Built two at a time even under a plain `make check`.
fuzz-check:
	@$(MAKE) --no-print-directory -j2 fuzz-build
	@tests/fuzz/run.sh -t 15 -j 2 $(FUZZ)

$(B)/bench_policy: $(O)/tests/bench/bench_policy.o $(O)/brokerd/session.o \
	$(STORE_O) $(O)/brokerd/ratelimit.o $(COMMON_O)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(B)/bench_store: $(O)/tests/bench/bench_store.o $(O)/brokerd/session.o \
	$(STORE_O) $(O)/brokerd/auth.o $(COMMON_O)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

bench: all $(B)/bench_policy $(B)/bench_store
	HG_BUILD=$(B) tests/bench/run.sh

# The Debian package, built from a copy of the tree in build/deb
# (scripts/deb.sh, docs/packaging.md): build/deb/hostgate_VERSION_ARCH.deb.
# DEB_VERSION= builds it with another version.
deb:
	@DEB_VERSION='$(DEB_VERSION)' scripts/deb.sh

# The package booted under systemd on cgroup v2 in qemu: install, the
# first admin, an upgrade, remove and purge (tests/vm/).
DEB_ARCH = $(shell dpkg-architecture -qDEB_HOST_ARCH)
DEB_FILE = build/deb/hostgate_$(or $(DEB_VERSION),$(HG_VERSION_STR))_$(DEB_ARCH).deb
vm: deb $(B)/tests/test_policy
	HGVM_UNIT="$(B)/tests/test_policy" tests/vm/run.sh $(DEB_FILE)

clean:
	rm -rf build build-san build-release build-fuzz

# The compiler writes the dependency files (-MMD); no rule makes them, or
# make would try test_maps_%.o's pattern with the stem "brokerd.d".
%.d: ;
-include $(shell find $(O) -name '*.d' -type f 2>/dev/null)
-include $(shell find $(FZ_O) -name '*.d' -type f 2>/dev/null)

.PHONY: all web unit system browser check run install fuzz fuzz-build \
	fuzz-check bench clean protodoc protodoc-check docs-check deb vm \
	build-check
