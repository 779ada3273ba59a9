#!/usr/bin/env bash
# Tests dev/gpu/prebuilt.sh, which decides whether a GPU session runs binaries built on the build
# machine or builds its own: a wrong "yes" would measure and test stale code on the GPU, a wrong
# "no" costs two of the session's 15 minutes. On a copy of the sources (no .git, as on the GPU
# machine), with small dynamic programs standing in for the CUDA binaries:
#  - pack then install: every binary lands in its place, byte for byte, and the library path the
#    binaries need is written to build/prebuilt/ld_library_path;
#  - the digest is the same in a copy without .git, changes with one byte of a header, of a
#    workbench or of llm.c's carried tree and with a renamed source, and not with the README;
#  - install refuses, naming the reason and leaving every installed binary as it was, when the
#    sources differ, when a binary is missing from the pack, when a binary needs a library that is
#    not there (named in the message) or a symbol its library lacks (an older NCCL or cuDNN), when
#    the archive is damaged, and for a name it does not
#    pack; installing named binaries only takes those, whatever the others need;
#  - without a pack, one line that says how to make one.
# Usage, from the repo root: bash dev/test/test_prebuilt.sh
source "$(dirname "$0")/lib.sh" test_prebuilt
command -v cc > /dev/null || { skip_or_fail test_prebuilt "a C compiler (cc)" "apt-get install gcc"; exit; }

# the tree as the GPU machine gets it, and stand-ins for the binaries: each a dynamic program
# printing its own name; one more needs libgone.so, removed after linking
gpu_machine_tree tree
P=(bash tree/dev/gpu/prebuilt.sh)
stand_in_binaries tree 'puts("%s"); return 0;' || bad "could not compile the stand-ins"
BINARIES=("${STAND_INS[@]}")
[ ${#BINARIES[@]} -ge 10 ] || bad "prebuilt.sh list gave ${#BINARIES[@]} binaries"
echo "int gone(void) { return 1; }" | cc -shared -fPIC -x c - -o libgone.so
echo "int gone(void); int main(void) { return gone(); }" | cc -x c - -L. -lgone -Wl,-rpath,"$PWD" -o needs_gone
# a library that is there but older: it lacks a symbol the binary calls
mkdir old
echo "int have(void) { return 0; } int newer(void) { return 1; }" | cc -shared -fPIC -Wl,-soname,libold.so -x c - -o old/libold.so
echo "int have(void); int newer(void); int main(void) { return have() + newer(); }" | cc -x c - -Lold -lold -Wl,-rpath,"$PWD/old" -o needs_newer
echo "int have(void) { return 0; }" | cc -shared -fPIC -Wl,-soname,libold.so -x c - -o old/libold.so

# ---- pack, then install into a tree without the binaries
PREBUILT_DIR=.carry/prebuilt "${P[@]}" pack > pack.txt 2>&1 || bad "pack: exit $? ($(tail -1 pack.txt))"
grep -q "^digest [0-9a-f]\{16\}$" tree/.carry/prebuilt/MANIFEST || bad "MANIFEST has no digest line: $(head -2 tree/.carry/prebuilt/MANIFEST)"
for b in "${BINARIES[@]}"; do mkdir -p "orig/$(dirname "$b")" && mv "tree/$b" "orig/$b"; done
if "${P[@]}" install > install.txt 2>&1; then
    n=0
    for b in "${BINARIES[@]}"; do
        cmp -s "tree/$b" "orig/$b" && [ "$(cd tree && "./$b")" = "$b" ] && n=$((n + 1))
    done
    [ $n -eq ${#BINARIES[@]} ] && ok "install: all ${#BINARIES[@]} binaries in place and running" \
        || bad "install: $n of ${#BINARIES[@]} binaries in place"
    [ -s tree/build/prebuilt/ld_library_path ] && ok "install wrote the library path: $(cut -c1-60 tree/build/prebuilt/ld_library_path)..." \
        || bad "install wrote no build/prebuilt/ld_library_path"
else
    bad "install of a fresh pack: exit $? ($(tail -1 install.txt))"
fi

# ---- the digest: what changes it and what does not
d0=$("${P[@]}" digest)
check_digest() {  # check_digest <what> <same|differs> <command that changes the tree> <command that restores it>
    eval "$3"
    local d
    d=$("${P[@]}" digest)
    eval "$4"
    if { [ "$2" = same ] && [ "$d" = "$d0" ]; } || { [ "$2" = differs ] && [ "$d" != "$d0" ]; }; then
        ok "digest $2 after $1"
    else
        bad "digest: after $1 it should be $2 ($d0 -> $d)"
    fi
}
check_digest "an edit of README.md" same "echo >> tree/README.md" "sed -i '\$d' tree/README.md"
check_digest "one byte of llmc/utils.h" differs "sed -i '1s/^/ /' tree/llmc/utils.h" "sed -i '1s/^ //' tree/llmc/utils.h"
check_digest "one byte of dev/cuda/gelu.cu" differs "sed -i '1s/^/ /' tree/dev/cuda/gelu.cu" "sed -i '1s/^ //' tree/dev/cuda/gelu.cu"
check_digest "one byte of llm.c's tree" differs "echo >> tree/.carry/llm.c/README.md" "sed -i '\$d' tree/.carry/llm.c/README.md"
check_digest "a renamed header" differs "mv tree/llmc/guard.h tree/llmc/guard2.h" "mv tree/llmc/guard2.h tree/llmc/guard.h"
[ "$("${P[@]}" digest)" = "$d0" ] || bad "the tree was not restored after the digest checks"

# ---- refusals: each names its reason and installs nothing
refused() {  # refused <what> <needle> [binary...]: install exits non-zero, says <needle>, leaves train_gpt2cu as it was
    echo "not installed" > tree/train_gpt2cu
    if "${P[@]}" install "${@:3}" > refuse.txt 2>&1; then
        bad "install with $1 succeeded"
    elif ! grep -q -- "$2" refuse.txt || [ "$(wc -l < refuse.txt)" -ne 1 ]; then
        bad "install with $1: expected one line with '$2', got: $(cat refuse.txt)"
    elif [ "$(cat tree/train_gpt2cu)" != "not installed" ]; then
        bad "install with $1 refused but replaced train_gpt2cu"
    else
        ok "install with $1 refused: $(cut -c1-110 refuse.txt)"
    fi
}
sed -i '1s/^/ /' tree/llmc/utils.h
refused "other sources" "built from other sources"
sed -i '1s/^ //' tree/llmc/utils.h
# a pack without one binary, then one whose bench_layers needs a library that is gone
(cd orig && tar -cf - --exclude=build/cuda/muon "${BINARIES[@]}" | xz > ../tree/.carry/prebuilt/binaries.tar.xz)
refused "a binary missing from the pack" "build/cuda/muon: missing"
cp needs_gone orig/build/bench_layers && rm libgone.so
(cd orig && tar -cf - "${BINARIES[@]}" | xz > ../tree/.carry/prebuilt/binaries.tar.xz)
refused "a library missing" "build/bench_layers: libgone.so => not found"
cp needs_newer orig/build/bench_layers
(cd orig && tar -cf - "${BINARIES[@]}" | xz > ../tree/.carry/prebuilt/binaries.tar.xz)
refused "an older library, without a symbol the binary calls" "build/bench_layers: undefined symbol: newer"
# install of named binaries only: the one-GPU trainer goes in although bench_layers would not load;
# train_gpt2cu is left alone; a name that is not packed is refused
echo "not installed" > tree/train_gpt2cu && rm -f tree/build/single_gpu/train_gpt2cu
if "${P[@]}" install build/single_gpu/train_gpt2cu > subset.txt 2>&1 && cmp -s tree/build/single_gpu/train_gpt2cu orig/build/single_gpu/train_gpt2cu \
   && [ "$(cat tree/train_gpt2cu)" = "not installed" ]; then
    ok "install build/single_gpu/train_gpt2cu alone: installed, nothing else touched"
else
    bad "install of one named binary: $(cat subset.txt)"
fi
refused "a name not in the pack" "no_such_binary is not one of the prebuilt binaries" no_such_binary
echo "not an archive" > tree/.carry/prebuilt/binaries.tar.xz
refused "a damaged pack" "could not unpack"
rm -rf tree/.carry/prebuilt
refused "no pack" "dev/gpu/prebuilt.sh build"
finish
