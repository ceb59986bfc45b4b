# nnbench — build, test, check (ASan+UBSan), install, deps, run, bench.
# The README's two set-up commands are `make run` and `make test`; both call `make deps`.

CC      ?= cc
PREFIX  ?= /usr/local
DESTDIR ?=
BUILD   ?= build

PKGS := ncursesw sqlite3 papi openblas lapacke cmocka inih zlib ompi-c libmicrohttpd fftw3f
# Recursive (=) on purpose: pkg-config is only asked once a compile runs, after `make deps`.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   = $(shell pkg-config --libs $(PKGS))

WARN    := -Wall -Wextra -Wpedantic -Werror -Wshadow -Wno-unused-parameter
CSTD    := -std=c11 -D_GNU_SOURCE
OPT     ?= -O2 -g
SAN     :=
CFLAGS_ALL  = $(CSTD) $(OPT) $(WARN) $(SAN) $(PKG_CFLAGS) -MMD -MP $(CFLAGS)
# libmetis (graph partitioning) and oneDNN (libdnnl-dev, the int8 matmul path; with its
# OpenMP runtime) ship no pkg-config file.
LDLIBS_ALL  = $(SAN) $(PKG_LIBS) -lmetis -ldnnl -lgomp -lsde -lpthread -lm $(LDLIBS)

MODULES  := profiler quantum engine store tui
# A module's parts may sit one folder down (engine/data/, engine/graph/, engine/quant/).
LIB_SRC  := $(filter-out tui/main.c,$(foreach m,$(MODULES),$(wildcard $(m)/*.c $(m)/*/*.c)))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_MODULES := $(foreach m,$(MODULES),$(if $(wildcard tests/$(m)/*.c),$(m)))
TEST_BINS := $(TEST_MODULES:%=$(BUILD)/tests/test_%)
# Fuzz targets (tests/fuzz/NAME.c): linked with replay.c into BUILD/fuzz/NAME for the corpus
# replay of `make test`/`make check`, with libFuzzer into build-fuzz/fuzzer/NAME by `make fuzz`.
FUZZ_TARGETS := config idx csv store graph_edges graph_features graph_labels cache ckpt
FUZZ_BINS := $(FUZZ_TARGETS:%=$(BUILD)/fuzz/%)
FUZZ_S ?= 60
.SECONDARY: $(FUZZ_TARGETS:%=$(BUILD)/tests/fuzz/%.o) $(BUILD)/tests/fuzz/replay.o
BENCH_SRC := $(wildcard tests/bench/*.c)
BENCH_BINS := $(BENCH_SRC:tests/bench/%.c=$(BUILD)/bench/%)

.PHONY: all nnbench tests test check deps run install uninstall clean bench bench-quick bench-peers demo fuzz fuzz-bins
.DEFAULT_GOAL := all

all: nnbench

nnbench: $(BUILD)/nnbench
	@ln -sf $(BUILD)/nnbench nnbench

$(BUILD)/nnbench: $(BUILD)/tui/main.o $(BUILD)/libnnbench.a
	$(CC) -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/libnnbench.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c -o $@ $<

# Adam's update takes a square root per element: without errno to set, sqrtf is one
# instruction the vectoriser can widen (correctly rounded either way: the same bits);
# with it, the loop stayed scalar at 2.3 ns an element.
$(BUILD)/engine/optim.o: CFLAGS_ALL += -fno-math-errno

# store/schema.sql, embedded in store/schema.c as generated string macros.
$(BUILD)/store/schema_sql.h: store/schema.sql scripts/embed_schema.awk
	@mkdir -p $(dir $@)
	awk -f scripts/embed_schema.awk store/schema.sql >$@.tmp && mv $@.tmp $@
$(BUILD)/store/schema.o: $(BUILD)/store/schema_sql.h
$(BUILD)/store/schema.o: CFLAGS_ALL += -I$(BUILD)/store

# One CMocka executable per module, from every .c under tests/<module>/.
.SECONDEXPANSION:
# (subst, not patsubst: in a pattern rule's second expansion every % is the stem.)
$(BUILD)/tests/test_%: $$(addprefix $(BUILD)/,$$(subst .c,.o,$$(wildcard tests/$$*/*.c))) $(BUILD)/libnnbench.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/bench/%: $(BUILD)/tests/bench/%.o $(BUILD)/libnnbench.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/fuzz/%: $(BUILD)/tests/fuzz/%.o $(BUILD)/tests/fuzz/replay.o $(BUILD)/libnnbench.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/fuzzer/%: $(BUILD)/tests/fuzz/%.o $(BUILD)/libnnbench.a
	@mkdir -p $(dir $@)
	$(CC) -fsanitize=fuzzer -o $@ $^ $(LDLIBS_ALL)

tests: all $(TEST_BINS) $(BENCH_BINS) $(FUZZ_BINS)

deps:
	@sh scripts/deps.sh

# Every test: unit tests (one CMocka executable per module), then the end-to-end scripts.
test: deps
	@$(MAKE) --no-print-directory tests
	@sh tests/run.sh $(BUILD)

# The same tests under AddressSanitizer + UndefinedBehaviorSanitizer, in their own tree.
check: deps
	@$(MAKE) --no-print-directory BUILD=build-san OPT="-O1 -g -fno-omit-frame-pointer" \
	    SAN="-fsanitize=address,undefined -fno-sanitize-recover=all" tests
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	    NNBENCH_SANITIZED=1 sh tests/run.sh build-san

# libFuzzer (clang) with ASan+UBSan, FUZZ_S seconds per target (default 60), starting from
# tests/fuzz/corpus/; a crash is minimised into the corpus and fails the target.
fuzz: deps
	@sh scripts/deps.sh clang libclang-rt-dev
	@$(MAKE) --no-print-directory BUILD=build-fuzz CC=clang OPT="-O1 -g -fno-omit-frame-pointer" \
	    SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fsanitize=fuzzer-no-link" fuzz-bins
	@sh tests/fuzz/run.sh build-fuzz $(FUZZ_S) $(FUZZ_TARGETS)

fuzz-bins: $(FUZZ_TARGETS:%=$(BUILD)/fuzzer/%)

run: deps
	@$(MAKE) --no-print-directory all
	./nnbench tui --db ./nnbench.db

bench: deps
	@$(MAKE) --no-print-directory tests
	@sh tests/bench/run.sh $(BUILD)

bench-quick: deps
	@$(MAKE) --no-print-directory tests
	@sh tests/bench/run.sh $(BUILD) --quick

bench-peers: deps
	@sh scripts/deps.sh python3-torch python3-numpy
	@$(MAKE) --no-print-directory tests
	@sh tests/bench/run.sh $(BUILD) --peers

# The man page and the bash completion are generated from the command table and each
# command's --help (tui/cmd_help.c), so they cannot drift from the binary.
$(BUILD)/nnbench.1: $(BUILD)/nnbench
	$(BUILD)/nnbench help --man >$@.tmp && mv $@.tmp $@

$(BUILD)/nnbench.bash: $(BUILD)/nnbench
	$(BUILD)/nnbench help --bash-completion >$@.tmp && mv $@.tmp $@

install: all $(BUILD)/nnbench.1 $(BUILD)/nnbench.bash
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/nnbench/samples \
	    $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	install -m 755 $(BUILD)/nnbench $(DESTDIR)$(PREFIX)/bin/nnbench
	install -m 644 $(BUILD)/nnbench.1 $(DESTDIR)$(PREFIX)/share/man/man1/nnbench.1
	install -m 644 $(BUILD)/nnbench.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/nnbench
	install -m 644 samples/*.ini $(DESTDIR)$(PREFIX)/share/nnbench/samples/
	-cp -r samples/data $(DESTDIR)$(PREFIX)/share/nnbench/samples/ 2>/dev/null

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/nnbench $(DESTDIR)$(PREFIX)/share/man/man1/nnbench.1 \
	    $(DESTDIR)$(PREFIX)/share/bash-completion/completions/nnbench
	rm -rf $(DESTDIR)$(PREFIX)/share/nnbench

clean:
	rm -rf build build-san build-fuzz nnbench

-include $(shell find $(BUILD) build-san build-fuzz -name '*.d' 2>/dev/null)
