# cued — make deps | build | run | test | sounds | clean
SWIFT     ?= swift
SINK      ?= alsa:default
ARGS      ?=
SUDO      := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PKGS  := pkg-config libasound2-dev libsndfile1-dev libsamplerate0-dev alsa-utils socat sox
BIN_DEBUG  = $(shell $(SWIFT) build --show-bin-path)

.PHONY: deps build run test sounds clean

# Installs only the Debian packages that dpkg says are missing.
deps:
	@missing=$$(for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing" $$missing; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

build: deps
	$(SWIFT) build -c release

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

clean:
	rm -rf .build
