# cued — make deps | build | run | test (test-deps) | deb | sounds | man | install | uninstall | clean
SWIFT     ?= swift
SINK      ?=
ARGS      ?=
SUDO      := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# What each target installs: only the Debian packages dpkg says are missing (apt-get update first).
# make build / make run (deps): building and running cued, nothing else: pkg-config and the headers
# of the C libraries it uses (ALSA, libsndfile, libsamplerate; libpipewire-0.3-dev: the native
# PipeWire sink; libsystemd-dev: sd-bus for the D-Bus face); gcc and libcanberra-dev (canberra.h):
# the libcanberra plug-in make build builds; binutils: strip (make install). No sound server, no
# system service: cued plays through whatever the desktop runs.
RUN_PKGS  := pkg-config libasound2-dev libsndfile1-dev libsamplerate0-dev libpipewire-0.3-dev libsystemd-dev \
             gcc libcanberra-dev binutils
# make test (test-deps): ALSA tools, socat and netcat (the README's clients), systemd's tools, a
# private PipeWire/PulseAudio stack, the freedesktop sound theme, man, the shells `cuectl
# shell-init` and the completions are tested in; a hung file system for the decoding lane's test
# (fuse3, python3-fusepy). scdoc makes the man pages (make man; install uses the committed roff and
# make test checks it is current); python3 runs the README's Python example; bash-completion loads
# the bash completions; dpkg-dev (dpkg-shlibdeps) and lintian: make deb's test. feedbackd (fbcli),
# libfeedback with python3-gi, notify-send and gdbus: the D-Bus face's real clients. The plug-in's
# real clients: canberra-gtk-play (gnome-session-canberra) under Xvfb, GSound (gir1.2-gsound-1.0), and
# libcanberra's pulse driver (libcanberra-pulse), which the plug-in falls back to. rtkit and polkitd:
# the desktop's real time, which cued run as a user asks for (on a private system bus in the tests).
# debootstrap: the Debian 13 root of the second PipeWire phase (Tests/stacks/debian13.sh). The real
# xdg-desktop-portal with its GTK backend (RealPortalTests). lame and sox's MP3 handler
# (libsox-fmt-mp3) make the MP3s whose estimated length the decoder's tests read.
TEST_PKGS := alsa-utils socat netcat-openbsd sox systemd util-linux dbus pipewire pipewire-bin pipewire-alsa pipewire-pulse \
             wireplumber pulseaudio-utils libasound2-plugins sound-theme-freedesktop man-db zsh fish bash-completion scdoc \
             python3 fuse3 python3-fusepy dpkg-dev lintian feedbackd libfeedback-0.0-0 gir1.2-lfb-0.0 python3-gi \
             libnotify-bin libglib2.0-bin libcanberra-pulse gnome-session-canberra xvfb gir1.2-gsound-1.0 rtkit polkitd \
             debootstrap xdg-desktop-portal xdg-desktop-portal-gtk lame libsox-fmt-mp3 uidmap
# make deb (deb-deps): dpkg-shlibdeps (dpkg-dev); lintian checks the package in make test.
DEB_PKGS  := dpkg-dev
# Installs those of the packages $(1) that dpkg says are missing; $(2) names the target in what it says.
define APT_INSTALL
	@missing=$$(for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "make $(2): installing" $$missing; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
endef
# SwiftPM colours diagnostics only when its output is a terminal, and the colour
# flag is part of every compile command: a release build after one whose output
# went elsewhere (a pipe, a terminal) recompiled everything. Colour is fixed off.
SWIFTPM_FLAGS := --no-color-diagnostics
# One release configuration for build, install, bench and test: the Swift runtime
# linked in, so the installed binaries run without the toolchain.
RELEASE    = $(SWIFT) build -c release --static-swift-stdlib $(SWIFTPM_FLAGS)
BIN_DEBUG  = $(shell $(SWIFT) build --show-bin-path $(SWIFTPM_FLAGS))
PREFIX    ?= $(HOME)/.local
BINDIR    ?= $(PREFIX)/bin
DATADIR   ?= $(PREFIX)/share
SOUNDDIR  ?= $(DATADIR)/cued/cues
MANDIR    ?= $(DATADIR)/man
BASHCOMPDIR ?= $(DATADIR)/bash-completion/completions
ZSHCOMPDIR  ?= $(DATADIR)/zsh/site-functions
FISHCOMPDIR ?= $(DATADIR)/fish/vendor_completions.d
UNITDIR   ?= $(or $(XDG_CONFIG_HOME),$(HOME)/.config)/systemd/user
STRIP     ?= strip
SYSTEMCTL ?= systemctl
MAN_PAGES := docs/man/cued.1 docs/man/cuectl.1 docs/man/cued.toml.5

.PHONY: deps test-deps deb-deps debian13-root test-sudo pkgconfig bench-deps build canberra canberra-stress canberra-fuzz canberra-fuzz-build wire run deb deb-package test bench fuzz reliability glitch-soak sounds man man-check install install-files install-units install-canberra uninstall uninstall-canberra clean

# What building and running cued needs (RUN_PKGS); test-deps, bench-deps and deb-deps add theirs.
deps:
	$(call APT_INSTALL,$(RUN_PKGS),deps)
test-deps: deps
	$(call APT_INSTALL,$(TEST_PKGS),test-deps)
deb-deps: deps
	$(call APT_INSTALL,$(DEB_PKGS),deb-deps)

# SwiftPM refuses any -D in a pkg-config file's Cflags, with a warning on every build, and
# libpipewire-0.3.pc has -D_REENTRANT (a no-op with glibc): make's builds read the same
# flags without it, from a copy in .build/pkgconfig (a plain `swift build` still warns).
# Nor its Libs: cued loads libpipewire when it first opens a PipeWire output (dlopen, see
# Sources/CPipeWire/shim.h), not at every start (a plain `swift build` links it, unused).
PC_DIR := $(CURDIR)/.build/pkgconfig
SYSTEM_PKG_CONFIG_PATH := $(PKG_CONFIG_PATH)
export PKG_CONFIG_PATH := $(PC_DIR)$(if $(SYSTEM_PKG_CONFIG_PATH),:$(SYSTEM_PKG_CONFIG_PATH))
pkgconfig: deps
	@mkdir -p '$(PC_DIR)'; export PKG_CONFIG_PATH='$(SYSTEM_PKG_CONFIG_PATH)'; \
	printf 'Name: libpipewire-0.3\nDescription: libpipewire headers without -D flags, not linked (for SwiftPM)\nVersion: %s\nLibs:\nCflags: %s\n' \
	  "$$(pkg-config --modversion libpipewire-0.3)" \
	  "$$(pkg-config --cflags-only-I libpipewire-0.3)" > '$(PC_DIR)/libpipewire-0.3.pc.tmp' && \
	mv '$(PC_DIR)/libpipewire-0.3.pc.tmp' '$(PC_DIR)/libpipewire-0.3.pc'
	@# libsndfile likewise: cued loads it while it decodes (Sources/CSndFile/shim.h); cuesynth and the tests link it.
	@export PKG_CONFIG_PATH='$(SYSTEM_PKG_CONFIG_PATH)'; \
	printf 'Name: sndfile\nDescription: libsndfile headers, not linked (for SwiftPM)\nVersion: %s\nLibs:\nCflags: %s\n' \
	  "$$(pkg-config --modversion sndfile)" "$$(pkg-config --cflags-only-I sndfile)" > '$(PC_DIR)/sndfile.pc.tmp' && \
	mv '$(PC_DIR)/sndfile.pc.tmp' '$(PC_DIR)/sndfile.pc'

# Not `pulseaudio`: Debian's package conflicts with pipewire-alsa, which the tests need;
# PipeWire's own PulseAudio server (pipewire-pulse) is what the bench measures.
BENCH_PKGS := gcc gnome-session-canberra libcanberra-pulse xvfb pulseaudio-utils libasound2-plugins python3-matplotlib python3-numpy
# The bench runs the tests' private stacks (test-deps) and its peers.
bench-deps: test-deps
	$(call APT_INSTALL,$(BENCH_PKGS),bench-deps)

# Figures, not tests: writes BENCHMARKS.md and docs/latency.png (about 40 minutes;
# `BENCH_ONLY=SECTION /usr/bin/python3 bench/bench.py` runs one section, e.g. voices or desktop,
# and replaces its section of BENCHMARKS.md; bench/README.md lists them).
# bench's own C tools (bench/pw_onset.c) link libpipewire: the system's .pc, not make's headers-only copy.
bench: bench-deps build canberra-stress
	PKG_CONFIG_PATH='$(SYSTEM_PKG_CONFIG_PATH)' /usr/bin/python3 bench/bench.py

build: deps pkgconfig
	$(RELEASE)
	@$(MAKE) --no-print-directory canberra

# libcanberra-cued.so, libcanberra's driver for cued (canberra/): plain C built by the C
# compiler, not SwiftPM. It is loaded into other people's programs (GNOME Shell, GTK apps),
# so it must carry no Swift runtime and export only libcanberra's eight entry points
# (-fvisibility=hidden), and SwiftPM builds C only into Swift products. Warnings are errors.
CANBERRA_SO     := .build/canberra/libcanberra-cued.so
CANBERRA_CFLAGS := -std=gnu11 -O2 -g -fPIC -fvisibility=hidden -pthread -Wall -Wextra -Wshadow -Wformat=2 -Werror
canberra: deps $(CANBERRA_SO)
CANBERRA_SRC    := $(sort $(wildcard canberra/*.c))
$(CANBERRA_SO): $(CANBERRA_SRC) $(wildcard canberra/*.h)
	@mkdir -p .build/canberra
	$(CC) $(CANBERRA_CFLAGS) $$(pkg-config --cflags libcanberra) -shared -Wl,--no-undefined -Wl,-z,defs -Wl,-z,relro -Wl,-z,now \
	  -o '$@' $(CANBERRA_SRC) $$(pkg-config --libs libcanberra)

# The plug-in's stress (canberra/stress/): a host process driving real libcanberra, a fake cued
# with hostile modes, a fallback driver standing in for pulse; and the plug-in, the host and
# that driver built again with ASan+UBSan and with TSan (gcc's runtimes), each set in its own
# directory (plain: the plug-in as built). make test runs a short stress of each; make
# reliability a long one.
CANBERRA_HDRS   := $(wildcard canberra/*.h)
STRESS_DIR      := .build/canberra/stress
STRESS_CFLAGS   := -std=gnu11 -g -pthread -Wall -Wextra -Wshadow -Werror
SAN_asan        := -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
SAN_tsan        := -O1 -fno-omit-frame-pointer -fsanitize=thread
SAN_plain       := -O2
canberra-stress: canberra $(STRESS_DIR)/fake-cued $(foreach v,plain asan tsan,$(STRESS_DIR)/$(v)/canberra-host $(STRESS_DIR)/$(v)/libcanberra-stressfb.so) \
                 $(foreach v,asan tsan,$(STRESS_DIR)/$(v)/libcanberra-cued.so) $(STRESS_DIR)/slow-player-end.so
$(STRESS_DIR)/fake-cued: canberra/stress/fake-cued.c
	@mkdir -p $(@D)
	$(CC) $(STRESS_CFLAGS) -O2 -o '$@' $<
# Preloaded (unsanitized, for every build) to widen the alsa driver's end-of-play race (its header).
$(STRESS_DIR)/slow-player-end.so: canberra/stress/slow-player-end.c
	@mkdir -p $(@D)
	$(CC) $(STRESS_CFLAGS) -O2 -fPIC -shared -fvisibility=hidden -o '$@' $< -ldl
define STRESS_VARIANT
$(STRESS_DIR)/$(1)/canberra-host: canberra/stress/host.c canberra/stress/cued-control.c canberra/stress/figures.c canberra/stress/host.h
	@mkdir -p $$(@D)
	$$(CC) $$(STRESS_CFLAGS) $$(SAN_$(1)) $$$$(pkg-config --cflags libcanberra) -o '$$@' $$(filter %.c,$$^) $$$$(pkg-config --libs libcanberra)
$(STRESS_DIR)/$(1)/libcanberra-stressfb.so: canberra/stress/fallback-driver.c canberra/canberra-private.h
	@mkdir -p $$(@D)
	$$(CC) $$(STRESS_CFLAGS) $$(SAN_$(1)) -fPIC -shared -fvisibility=hidden $$$$(pkg-config --cflags libcanberra) -o '$$@' $$< $$$$(pkg-config --libs libcanberra)
$(STRESS_DIR)/$(1)/libcanberra-cued.so: $$(CANBERRA_SRC) $$(CANBERRA_HDRS)
	@mkdir -p $$(@D)
	$$(CC) $$(CANBERRA_CFLAGS) $$(SAN_$(1)) $$$$(pkg-config --cflags libcanberra) -shared -o '$$@' $$(CANBERRA_SRC) $$$$(pkg-config --libs libcanberra)
endef
$(foreach v,plain asan tsan,$(eval $(call STRESS_VARIANT,$(v))))

# libFuzzer on the plug-in's reply parser (fuzz/canberra_reply_libfuzzer.c): clang's, the one
# beside swift in its toolchain. CANBERRA_FUZZ_RUNS inputs from the corpus fuzz/seeds/canberra.
CLANG           ?= $(dir $(realpath $(shell command -v $(SWIFT))))clang
CANBERRA_FUZZ   := .build/canberra/fuzz-reply
CANBERRA_FUZZ_RUNS ?= 2000000
canberra-fuzz: $(CANBERRA_FUZZ)
	@mkdir -p .build/canberra/fuzz-corpus .build/canberra/fuzz-finds
	'$(CANBERRA_FUZZ)' -runs=$(CANBERRA_FUZZ_RUNS) -max_len=1024 -print_final_stats=1 -artifact_prefix=.build/canberra/fuzz-finds/ \
	  .build/canberra/fuzz-corpus fuzz/seeds/canberra 2>&1 | tail -4
# make test builds it where the toolchain has its clang (its test says when it is skipped).
canberra-fuzz-build:
	@if [ -x '$(CLANG)' ]; then $(MAKE) --no-print-directory '$(CANBERRA_FUZZ)'; \
	else echo "make: no clang beside swift ('$(CLANG)'): the plug-in's reply fuzzer is not built"; fi
$(CANBERRA_FUZZ): fuzz/canberra_reply_libfuzzer.c canberra/reply.c canberra/reply.h canberra/cued-wire.h
	@mkdir -p $(@D)
	'$(CLANG)' -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Wall -Wextra -Werror \
	  $$(pkg-config --cflags libcanberra) -o '$@' fuzz/canberra_reply_libfuzzer.c canberra/reply.c 2>&1 | { grep -v 'Cannot export local symbol' || true; }

# The wire's words for the plug-in (canberra/cued-wire.h) and bench's clients (bench/cuedwire.py),
# generated from Sources/CuedProtocol/Wire.swift; checked in, and make test fails when they drift.
wire: deps pkgconfig
	$(SWIFT) build --product cuedwire $(SWIFTPM_FLAGS)
	'$(BIN_DEBUG)/cuedwire' c > canberra/cued-wire.h.tmp && mv canberra/cued-wire.h.tmp canberra/cued-wire.h
	'$(BIN_DEBUG)/cuedwire' python > bench/cuedwire.py.tmp && mv bench/cuedwire.py.tmp bench/cuedwire.py

FUZZ_INPUTS ?= 10000000
# The differential TOML run (cued's parser vs Python's tomllib) is slower: 1 million.
TOML_DIFF_INPUTS ?= 1000000
# 10 million inputs per parser: libFuzzer on the protocol, TOML and JSON parsers and the libcanberra
# plug-in's reply parser (the TOML and
# JSON runs start from fuzz/seeds/, nested far past their limits, copied so that libFuzzer's
# finds stay in .build), the seeded driver (cuedfuzz) on the protocol, config and JSON parsers,
# and cued's TOML parser against Python's tomllib. Ends non-zero on the first crash or broken property.
LIBFUZZ = swiftc -sanitize=fuzzer,address -parse-as-library -O
fuzz: build
	rm -rf .build/fuzz/corpus && mkdir -p .build/fuzz/corpus && cp -r fuzz/seeds/toml fuzz/seeds/json .build/fuzz/corpus/
	$(LIBFUZZ) Sources/CuedProtocol/*.swift fuzz/protocol_libfuzzer.swift -o .build/fuzz/protocol -Xlinker --no-warnings -use-ld=lld
	.build/fuzz/protocol -runs=$(FUZZ_INPUTS) -max_len=1024 -print_final_stats=1 2>&1 | tee .build/fuzz/protocol.log | tail -3
	$(LIBFUZZ) Sources/CuedConfig/TOML*.swift fuzz/toml_libfuzzer.swift -o .build/fuzz/toml -Xlinker --no-warnings -use-ld=lld
	.build/fuzz/toml -runs=$(FUZZ_INPUTS) -max_len=4096 -print_final_stats=1 .build/fuzz/corpus/toml 2>&1 | tee .build/fuzz/toml.log | tail -3
	$(LIBFUZZ) Sources/CuedProtocol/*.swift fuzz/json_libfuzzer.swift -o .build/fuzz/json -Xlinker --no-warnings -use-ld=lld
	.build/fuzz/json -runs=$(FUZZ_INPUTS) -max_len=4096 -print_final_stats=1 .build/fuzz/corpus/json 2>&1 | tee .build/fuzz/json.log | tail -3
	$(MAKE) --no-print-directory $(CANBERRA_FUZZ)
	mkdir -p .build/fuzz/canberra-corpus && '$(CANBERRA_FUZZ)' -runs=$(FUZZ_INPUTS) -max_len=1024 -print_final_stats=1 \
	  -artifact_prefix=.build/fuzz/ .build/fuzz/canberra-corpus fuzz/seeds/canberra 2>&1 | tee .build/fuzz/canberra.log | tail -3
	.build/release/cuedfuzz protocol -n $(FUZZ_INPUTS) | tee .build/fuzz/cuedfuzz-protocol.log
	.build/release/cuedfuzz config -n $(FUZZ_INPUTS) | tee .build/fuzz/cuedfuzz-config.log
	.build/release/cuedfuzz json -n $(FUZZ_INPUTS) | tee .build/fuzz/cuedfuzz-json.log
	.build/release/cuedfuzz toml -n $(TOML_DIFF_INPUTS) | tee .build/fuzz/cuedfuzz-toml.log

# Every reliability scenario against the real daemon (release), with its figures:
# writes RELIABILITY.md (about 15 minutes, most of it `make fuzz`). RELIABILITY_ONLY=CONCERN or
# SECTION,… (e.g. devices, leaks) runs those alone and replaces their rows (bench/README.md).
reliability: test-deps fuzz canberra-stress
	PKG_CONFIG_PATH='$(SYSTEM_PKG_CONFIG_PATH)' /usr/bin/python3 bench/reliability.py

# cued on PipeWire's ALSA plugin, every cue checked sample-exact at the null sink's monitor by two
# recorders, at graph quanta of 256 and 128 (bench/glitch_soak.py: about 20 minutes with the default
# 2,000 cues a quantum; GLITCH_SOAK_ARGS='--cues 500 --latency-ms 10' and the like pass options on).
# Ends non-zero if the sink lost or moved audio while the machine ran. Not part of `make test`.
glitch-soak: bench-deps build
	PKG_CONFIG_PATH='$(SYSTEM_PKG_CONFIG_PATH)' /usr/bin/python3 bench/glitch_soak.py --bin .build/release $(GLITCH_SOAK_ARGS)

# make run: SINK=SPEC forces an output; without it cued picks one (--sink auto: the
# desktop's sound server when one answers, else ALSA's default if it opens, else null)
# and says which and why in its first lines.
# Without XDG_RUNTIME_DIR (a container, su) and no CUED_SOCKET, the socket is ~/.cued.sock,
# said on the way with the line for cuectl's shell (cued alone would stop and say so).
run: build
	@[ -n '$(SINK)' ] || echo "make run: cued picks where sound goes (its config's sink, else auto) and says why; force one with SINK=…, e.g. make run SINK=wav:/tmp/cued.wav to record"
	@if [ -z "$$XDG_RUNTIME_DIR" ] && [ -z "$$CUED_SOCKET" ]; then \
	  echo "make run: XDG_RUNTIME_DIR is not set, so the socket is $$HOME/.cued.sock; where you run cuectl: export CUED_SOCKET=$$HOME/.cued.sock"; \
	  export CUED_SOCKET="$$HOME/.cued.sock"; \
	fi; exec .build/release/cued $(if $(SINK),--sink '$(SINK)') $(ARGS)

# The debug build with the tests, plus the release build installed into a
# scratch prefix that the install tests run (with the toolchain hidden).
TEST_PREFIX := $(CURDIR)/.build/test-install
# Paths are single-quoted in recipes: a checkout's path may hold a space.
TEST_DIRS    = PREFIX='$(TEST_PREFIX)' BINDIR='$(TEST_PREFIX)/bin' DATADIR='$(TEST_PREFIX)/share' \
               SOUNDDIR='$(TEST_PREFIX)/share/cued/cues' MANDIR='$(TEST_PREFIX)/share/man' \
               BASHCOMPDIR='$(TEST_PREFIX)/share/bash-completion/completions' \
               ZSHCOMPDIR='$(TEST_PREFIX)/share/zsh/site-functions' \
               FISHCOMPDIR='$(TEST_PREFIX)/share/fish/vendor_completions.d' UNITDIR='$(TEST_PREFIX)/units'
# The tests are synchronous, so at most one runs per core; Swift Testing starts every
# test case at once and a case's time limit counts from there, so once a run took over
# a minute, a 1-minute case still queued behind the others failed without having run
# long. With the width set to the cores, a case's clock starts when it gets one.
TEST_WIDTH := SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=$(shell nproc 2>/dev/null || echo 2)
# A run counts only when the runner said how it ended: swift test relays the runner's output
# and has lost its last lines (the summary among them) with status 0, and a runner that dies
# leaves no results. So the runner writes its own results (JUnit XML) and a run without them
# fails; the count shown after each run is the runner's, not what reached this log. Every phase
# runs whatever the one before did (Tests/phase.sh), and the summary at the end says each.
TEST_XML := $(CURDIR)/.build/test-results.xml
RESULTS   = --xunit-output '$(TEST_XML)'
TEST_PHASES := $(CURDIR)/.build/test-phases
PHASE     = '$(CURDIR)/Tests/phase.sh' run $(1) '$(TEST_XML)' '$(TEST_PHASES)' -- env
PIPEWIRE_TIMING_TESTS := PipeWireTests/(fiftyCuesInARow|cuesMidStream|theNativeStreamAsksTheQuantum|aStreamStoppedMidCue|aGraphCycleLonger|aGraphQuantumBelow|playWaitOnTheNativeStream)
# The PipeWire phase once more on Debian 13's stack (PipeWire 1.4, WirePlumber 0.5, the portal and
# feedbackd of today's desktops): every program those tests start, cued's release build (the Swift
# runtime linked in) among them, runs inside a Debian 13 root on its libraries (Tests/stacks/debian13.sh:
# built when missing, with sudo when not root, said once; cached in /var/cache/cued-test, rebuilt when
# Tests/stacks/debian13.packages changes). On by default; TEST_DEBIAN13=0 leaves it out (said so).
TEST_DEBIAN13 ?= 1
# There: the PipeWire suites, and the desktop's (feedbackd and notifications on a private bus, the
# portal stand-in and the real portal, libcanberra's clients through cued's plug-in).
DEBIAN13_TESTS := PipeWireTests|DesktopBusTests|DesktopSettingsTests|RealPortalTests|CanberraTests
DEBIAN13      := '$(CURDIR)/Tests/stacks/debian13.sh'
# Built before the tests start, so that its sudo (a normal user's) is asked at the start, not midway.
debian13-root: test-deps
	@$(DEBIAN13) root >/dev/null
# A normal user's tests run the private RTKit's daemons (a system bus, polkitd, rtkit-daemon) as
# root through `sudo -n`, as a desktop runs them: sudo is asked here, once (without it those tests
# are skipped, and the summary says why).
test-sudo:
	@if [ "$$(id -u)" != 0 ] && ! sudo -n /bin/true 2>/dev/null; then \
	  echo "make test: not root: sudo runs the private RTKit's daemons for the real-time tests (asked once)"; \
	  sudo -v || echo "make test: no sudo: the tests that need RTKit are skipped"; fi
test: test-deps build canberra-stress canberra-fuzz-build $(if $(filter 1,$(TEST_DEBIAN13)),debian13-root) test-sudo
	$(SWIFT) build --build-tests $(SWIFTPM_FLAGS)
	rm -rf '$(TEST_PREFIX)'
	$(MAKE) --no-print-directory -s install-files $(TEST_DIRS) >/dev/null
	rm -f '$(TEST_PHASES)'
	$(call PHASE,'everything but PipeWire') $(TEST_WIDTH) CUED_BIN_DIR='$(BIN_DEBUG)' CUED_RELEASE_BIN_DIR='$(CURDIR)/.build/release' CUED_TEST_PREFIX='$(TEST_PREFIX)' $(SWIFT) test --skip-build --disable-xctest $(RESULTS) --skip PipeWireTests
	@# Real-time audio through a private PipeWire, checked sample by sample: on its own,
	@# not beside 300 other tests competing for two cores (a starved sound server drops
	@# frames, which is what these tests would then report, not cued). cued runs as a user,
	@# its audio thread real-time through RTKit on a private system bus; then once more with
	@# no RTKit at all, as on a desktop without it (the thread normal, and said so): the tests
	@# whose verdict the thread's scheduling can change (cues sample-exact, the cycle asked,
	@# missed cycles counted), not those of restarts, targets and doctor (45 s, not 80).
	$(call PHASE,'PipeWire (Debian 12)') $(TEST_WIDTH) CUED_BIN_DIR='$(BIN_DEBUG)' $(SWIFT) test --skip-build --disable-xctest $(RESULTS) --filter PipeWireTests
	$(call PHASE,'PipeWire without RTKit (Debian 12)') $(TEST_WIDTH) CUED_TEST_RTKIT=off CUED_BIN_DIR='$(BIN_DEBUG)' $(SWIFT) test --skip-build --disable-xctest $(RESULTS) --filter '$(PIPEWIRE_TIMING_TESTS)'
ifeq ($(TEST_DEBIAN13),1)
	$(call PHASE,'PipeWire and the desktop (Debian 13)') $(TEST_WIDTH) CUED_TEST_STACK=debian13 CUED_TEST_ROOT="$$($(DEBIAN13) path)" CUED_BIN_DIR='$(CURDIR)/.build/release' $(SWIFT) test --skip-build --disable-xctest $(RESULTS) --filter '$(DEBIAN13_TESTS)'
else
	@echo "make test: the PipeWire phase on Debian 13's stack is off (make test TEST_DEBIAN13=1 runs it)"
endif
	@'$(CURDIR)/Tests/phase.sh' summary '$(TEST_PHASES)'

sounds: deps pkgconfig
	$(RELEASE) --product cuesynth
	.build/release/cuesynth --out Sounds --picture docs/cues.png --report

# scdoc stamps today's date into .TH; it is dropped so the committed pages stay
# what scdoc makes of their source (make test checks that they do).
SCDOC = scdoc < $(1).scd | sed '1,/^\.TH/s/^\(\.TH "[^"]*" "[^"]*"\) "[^"]*"$$/\1/'
man: $(MAN_PAGES)
$(MAN_PAGES): %: %.scd
	$(call SCDOC,$@) > $@
man-check:
	@for p in $(MAN_PAGES); do \
	  $(call SCDOC,$$p) | cmp -s - $$p || { echo "$$p differs from what scdoc makes of $$p.scd: run make man"; exit 1; }; \
	done

# Stripped binaries to $(BINDIR), cues to $(SOUNDDIR) (where cued looks by default:
# ../share/cued/cues beside its binary), man pages, completions, units to $(UNITDIR).
install: build
	$(MAKE) --no-print-directory install-files
	@echo "installed. Start on demand with:  systemctl --user daemon-reload && systemctl --user enable --now cued.socket"
	@echo "  or in a terminal:  $(BINDIR)/cued   (without a sound card: cued --sink null, or --sink wav:FILE)"

# What install copies, from the release build already there.
install-files:
	install -d '$(DESTDIR)$(BINDIR)' '$(DESTDIR)$(SOUNDDIR)' '$(DESTDIR)$(MANDIR)/man1' '$(DESTDIR)$(MANDIR)/man5' '$(DESTDIR)$(BASHCOMPDIR)' '$(DESTDIR)$(ZSHCOMPDIR)' '$(DESTDIR)$(FISHCOMPDIR)'
	install -m 0755 -s --strip-program='$(STRIP)' .build/release/cued .build/release/cuectl '$(DESTDIR)$(BINDIR)/'
	install -m 0644 Sounds/*.wav '$(DESTDIR)$(SOUNDDIR)/'
	sed 's|^Exec=.*|Exec="$(BINDIR)/cued"|' dbus/org.sigxcpu.Feedback.service > '$(DESTDIR)$(DATADIR)/cued/org.sigxcpu.Feedback.service'
	install -m 0644 docs/man/cued.1 docs/man/cuectl.1 '$(DESTDIR)$(MANDIR)/man1/'
	install -m 0644 docs/man/cued.toml.5 '$(DESTDIR)$(MANDIR)/man5/'
	install -m 0644 completions/cuectl.bash '$(DESTDIR)$(BASHCOMPDIR)/cuectl'
	install -m 0644 completions/cued.bash '$(DESTDIR)$(BASHCOMPDIR)/cued'
	install -m 0644 completions/_cuectl completions/_cued '$(DESTDIR)$(ZSHCOMPDIR)/'
	install -m 0644 completions/cuectl.fish completions/cued.fish '$(DESTDIR)$(FISHCOMPDIR)/'
	$(MAKE) --no-print-directory install-units BINDIR='$(BINDIR)' UNITDIR='$(UNITDIR)' DESTDIR='$(DESTDIR)'

# The units with the real ExecStart path written in (double-quoted for systemd).
install-units:
	install -d '$(DESTDIR)$(UNITDIR)'
	sed 's|^ExecStart=.*|ExecStart="$(BINDIR)/cued"|' systemd/cued.service > '$(DESTDIR)$(UNITDIR)/cued.service'
	install -m 0644 systemd/cued.socket '$(DESTDIR)$(UNITDIR)/cued.socket'

# make deb: cued_VERSION_ARCH.deb from the release build. A staged tree packed by
# dpkg-deb, not dpkg-buildpackage: the binaries come from SwiftPM's release build
# (which make build already runs), a debian/ source package would only wrap that
# and add debhelper to the build's needs, and nothing needs a maintainer script
# (user units are enabled per user). A native package (its version is cued's own),
# so its changelog is changelog.gz. Depends are what the binaries link, by
# dpkg-shlibdeps, so they carry the libraries' minimum versions; what cued loads
# when used (libpipewire, libsystemd's sd-bus) is recommended in control.in, and
# libsndfile, loaded while it decodes (no cue plays without it), is a Depends there
# (1.0.20: the oldest with each function cued takes, by its symbols file).
VERSION    = $(shell sed -n 's/.*static let string = "\([^"]*\)".*/\1/p' Sources/CuedProtocol/Protocol.swift)
DEB_ARCH   = $(shell dpkg --print-architecture)
DEB_DIR   ?= .build/deb
DEB_MAINTAINER ?= cued developers <maintainers@users.noreply.a-seed-a0081e49.example>
DEB        = $(DEB_DIR)/cued_$(VERSION)_$(DEB_ARCH).deb
DEB_DIRS  := PREFIX=/usr BINDIR=/usr/bin DATADIR=/usr/share SOUNDDIR=/usr/share/cued/cues MANDIR=/usr/share/man \
             BASHCOMPDIR=/usr/share/bash-completion/completions ZSHCOMPDIR=/usr/share/zsh/vendor-completions \
             FISHCOMPDIR=/usr/share/fish/vendor_completions.d UNITDIR=/usr/lib/systemd/user
deb: deb-deps build
	$(MAKE) --no-print-directory deb-package
	@echo "built $(DEB); install it with:  sudo apt install ./$(DEB)"

# The package from the release build already there (make test's DebTests use this).
# Staged where dpkg-shlibdeps expects a package's files (debian/cued under a one-stanza
# debian/control); it reads only the dynamically linked binaries (cuectl is static).
deb-package:
	@set -e; stage='$(DEB_DIR)/debian/cued'; rm -rf '$(DEB_DIR)/debian' '$(DEB)'; \
	$(MAKE) --no-print-directory -s install-files DESTDIR="$$stage" $(DEB_DIRS) >/dev/null; \
	$(MAKE) --no-print-directory -s install-canberra DESTDIR="$$stage" GENERATORDIR=/usr/lib/systemd/user-environment-generators >/dev/null; \
	gzip -9n "$$stage"/usr/share/man/man1/* "$$stage"/usr/share/man/man5/*; \
	doc="$$stage/usr/share/doc/cued"; install -d "$$doc" "$$stage/usr/share/lintian/overrides"; \
	{ cat packaging/deb/copyright.in; sed 's/^/ /; s/^ $$/ ./' LICENSE; } > "$$doc/copyright"; \
	epoch=$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct 2>/dev/null || date +%s)}; \
	sed -e 's/@VERSION@/$(VERSION)/' -e 's/@MAINTAINER@/$(DEB_MAINTAINER)/' -e "s/@DATE@/$$(LC_ALL=C date -R -u -d @$$epoch)/" \
	  packaging/deb/changelog | gzip -9n > "$$doc/changelog.gz"; \
	install -m 0644 packaging/deb/lintian-overrides "$$stage/usr/share/lintian/overrides/cued"; \
	chmod -R u=rwX,go=rX "$$stage"; chmod 0755 "$$stage"/usr/bin/* "$$stage"/usr/lib/systemd/user-environment-generators/*; \
	mkdir -m 0755 "$$stage/DEBIAN"; \
	printf 'Source: cued\n\nPackage: cued\nArchitecture: any\n' > '$(DEB_DIR)/debian/control'; \
	dynamic=$$(cd '$(DEB_DIR)' && for b in debian/cued/usr/bin/* debian/cued/usr/lib/*/libcanberra-*/*.so; do readelf -d "$$b" | grep -q NEEDED && echo "$$b"; done); \
	depends=$$(cd '$(DEB_DIR)' && dpkg-shlibdeps -O $$dynamic | sed -n 's/^shlibs:Depends=//p'); \
	sed -e 's/@VERSION@/$(VERSION)/' -e 's/@ARCH@/$(DEB_ARCH)/' -e 's/@MAINTAINER@/$(DEB_MAINTAINER)/' \
	  -e "s/@SIZE@/$$(du -sk --exclude=DEBIAN "$$stage" | cut -f1)/" -e "s/@DEPENDS@/$$depends/" \
	  packaging/deb/control.in > "$$stage/DEBIAN/control"; \
	(cd "$$stage" && find usr -type f | LC_ALL=C sort | xargs md5sum) > "$$stage/DEBIAN/md5sums"; \
	chmod 0644 "$$stage"/DEBIAN/*; \
	dpkg-deb --root-owner-group -Zxz --build "$$stage" '$(DEB)' >/dev/null

# libcanberra loads drivers from one directory, compiled into it and root's
# (/usr/lib/x86_64-linux-gnu/libcanberra-0.30 on Debian 12): `make install` into a home
# prefix cannot reach it. As root this puts the plug-in there, and the login hook that
# sets CANBERRA_DRIVER=cued for users who turn it on (`cuectl canberra on`) among systemd's
# user environment generators. The package installs both itself.
CANBERRA_DIR  ?= $(shell pkg-config --variable=libdir libcanberra 2>/dev/null)/libcanberra-$(shell pkg-config --modversion libcanberra 2>/dev/null)
GENERATORDIR  ?= /usr/local/lib/systemd/user-environment-generators
install-canberra: canberra
	install -d '$(DESTDIR)$(CANBERRA_DIR)' '$(DESTDIR)$(GENERATORDIR)'
	install -m 0644 -s --strip-program='$(STRIP)' '$(CANBERRA_SO)' '$(DESTDIR)$(CANBERRA_DIR)/libcanberra-cued.so'
	sed 's|@PLUGINDIR@|$(CANBERRA_DIR)|' canberra/60-cued-canberra.in > '$(DESTDIR)$(GENERATORDIR)/60-cued-canberra'
	chmod 0755 '$(DESTDIR)$(GENERATORDIR)/60-cued-canberra'
uninstall-canberra:
	rm -f '$(DESTDIR)$(CANBERRA_DIR)/libcanberra-cued.so' '$(DESTDIR)$(GENERATORDIR)/60-cued-canberra'
	@# The generator's directory and a systemd/ above it, once empty (libcanberra's own stays).
	@rmdir '$(DESTDIR)$(GENERATORDIR)' 2>/dev/null && [ "$$(basename "$$(dirname '$(DESTDIR)$(GENERATORDIR)')")" = systemd ] && \
	  rmdir "$$(dirname '$(DESTDIR)$(GENERATORDIR)')" 2>/dev/null || true

# Stops the units only where they are installed and systemctl can reach a user manager.
uninstall:
	@if [ -e '$(UNITDIR)/cued.socket' ] && command -v $(SYSTEMCTL) >/dev/null 2>&1; then \
	  $(SYSTEMCTL) --user disable --now cued.socket cued.service >/dev/null 2>&1 || true; \
	fi
	rm -f '$(BINDIR)/cued' '$(BINDIR)/cuectl' '$(UNITDIR)/cued.service' '$(UNITDIR)/cued.socket' \
	  '$(MANDIR)/man1/cued.1' '$(MANDIR)/man1/cuectl.1' '$(MANDIR)/man5/cued.toml.5' \
	  '$(BASHCOMPDIR)/cuectl' '$(BASHCOMPDIR)/cued' '$(ZSHCOMPDIR)/_cuectl' '$(ZSHCOMPDIR)/_cued' \
	  '$(FISHCOMPDIR)/cuectl.fish' '$(FISHCOMPDIR)/cued.fish'
	@# Only the cues install put there: a SOUNDDIR shared with other files keeps them.
	cd '$(SOUNDDIR)' 2>/dev/null && rm -f $(notdir $(wildcard Sounds/*.wav)) || true
	rmdir '$(SOUNDDIR)' 2>/dev/null || true
	rm -f '$(DATADIR)/cued/org.sigxcpu.Feedback.service'
	@# The directories install makes, once empty (never $(PREFIX) itself; a parent of
	@# UNITDIR only if it is systemd/), deepest first.
	@for d in '$(DATADIR)/cued' '$(MANDIR)/man1' '$(MANDIR)/man5' '$(MANDIR)' '$(BASHCOMPDIR)' '$(DATADIR)/bash-completion' \
	  '$(ZSHCOMPDIR)' '$(DATADIR)/zsh' '$(FISHCOMPDIR)' '$(DATADIR)/fish' '$(DATADIR)' '$(BINDIR)' '$(UNITDIR)'; do \
	  [ "$$d" != '$(PREFIX)' ] && rmdir "$$d" 2>/dev/null || continue; \
	  if [ "$$d" = '$(UNITDIR)' ] && [ "$$(basename "$$(dirname "$$d")")" = systemd ]; then rmdir "$$(dirname "$$d")" 2>/dev/null || true; fi; \
	done

clean:
	rm -rf .build
