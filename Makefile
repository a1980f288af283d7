# cued — make deps | build | run | test | sounds | install | uninstall | clean
SWIFT     ?= swift
SINK      ?= alsa:default
ARGS      ?=
SUDO      := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PKGS  := pkg-config libasound2-dev libsndfile1-dev libsamplerate0-dev alsa-utils socat sox systemd util-linux \
             dbus pipewire pipewire-bin pipewire-alsa pipewire-pulse wireplumber pulseaudio-utils libasound2-plugins
BIN_DEBUG  = $(shell $(SWIFT) build --show-bin-path)
PREFIX    ?= $(HOME)/.local
BINDIR    ?= $(PREFIX)/bin
SOUNDDIR  ?= $(PREFIX)/share/cued/sounds
UNITDIR   ?= $(HOME)/.config/systemd/user

.PHONY: deps bench-deps build run test bench fuzz reliability sounds install install-units uninstall clean

# Installs only the Debian packages that dpkg says are missing.
deps:
	@missing=$$(for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing" $$missing; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

BENCH_PKGS := gcc gnome-session-canberra libcanberra-pulse xvfb pulseaudio pulseaudio-utils libasound2-plugins python3-matplotlib
bench-deps: deps
	@missing=$$(for p in $(BENCH_PKGS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "make bench-deps: installing" $$missing; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

# Figures, not tests: writes BENCHMARKS.md and docs/latency.png (about 10 minutes).
bench: bench-deps build
	/usr/bin/python3 bench/bench.py

build: deps
	$(SWIFT) build -c release

FUZZ_INPUTS ?= 10000000
# 10 million inputs per parser: libFuzzer on the protocol parser, the seeded
# driver (cuedfuzz) on both. Ends non-zero on the first crash or broken property.
fuzz: build
	mkdir -p .build/fuzz
	swiftc -sanitize=fuzzer,address -parse-as-library -O Sources/CuedProtocol/*.swift fuzz/protocol_libfuzzer.swift \
	  -o .build/fuzz/protocol -Xlinker --no-warnings -use-ld=lld
	.build/fuzz/protocol -runs=$(FUZZ_INPUTS) -max_len=1024 -print_final_stats=1 2>&1 | tee .build/fuzz/protocol.log | tail -3
	.build/release/cuedfuzz protocol -n $(FUZZ_INPUTS) | tee .build/fuzz/cuedfuzz-protocol.log
	.build/release/cuedfuzz config -n $(FUZZ_INPUTS) | tee .build/fuzz/cuedfuzz-config.log

# Every reliability scenario against the real daemon (release), with its figures:
# writes RELIABILITY.md (about 15 minutes, most of it `make fuzz`).
reliability: fuzz
	/usr/bin/python3 bench/reliability.py

run: build
	@case "$(SINK)" in alsa*) \
	  if ! aplay -l 2>/dev/null | grep -q '^card'; then \
	    echo "make run: this machine has no sound card (aplay -l lists none)."; \
	    echo "          Run cued with a sink that needs none:  make run SINK=null"; \
	    echo "          or capture what it plays to a file:    make run SINK=wav:/tmp/cued.wav"; \
	    exit 2; \
	  fi;; esac
	.build/release/cued --sink $(SINK) $(ARGS)

test: deps
	$(SWIFT) build --build-tests
	CUED_BIN_DIR=$(BIN_DEBUG) $(SWIFT) test --skip-build

sounds: deps
	$(SWIFT) build -c release --product cuesynth
	.build/release/cuesynth --out Sounds --picture docs/cues.png --report

# Binaries to $(BINDIR), cues to $(SOUNDDIR) (where cued looks by default:
# ../share/cued/sounds beside its binary), units to $(UNITDIR).
install: build
	install -d $(BINDIR) $(SOUNDDIR)
	install -m 0755 .build/release/cued .build/release/cuectl $(BINDIR)/
	install -m 0644 Sounds/*.wav $(SOUNDDIR)/
	$(MAKE) --no-print-directory install-units BINDIR=$(BINDIR) UNITDIR=$(UNITDIR)
	@echo "installed. Start on demand with:  systemctl --user daemon-reload && systemctl --user enable --now cued.socket"

# The units with the real ExecStart path written in.
install-units:
	install -d $(UNITDIR)
	sed 's|^ExecStart=.*|ExecStart=$(BINDIR)/cued|' systemd/cued.service > $(UNITDIR)/cued.service
	install -m 0644 systemd/cued.socket $(UNITDIR)/cued.socket

uninstall:
	-systemctl --user disable --now cued.socket cued.service 2>/dev/null
	rm -f $(BINDIR)/cued $(BINDIR)/cuectl $(UNITDIR)/cued.service $(UNITDIR)/cued.socket
	rm -rf $(PREFIX)/share/cued

clean:
	rm -rf .build
