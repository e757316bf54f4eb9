#!/usr/bin/env python3
# Run by scripts/check_code.sh: every namespace-level type (struct, class, enum, union) in src/,
# include/, tools/ and tests/ is defined once per qualified name. Two definitions of one name link
# without a word and break at run time (the One Definition Rule): two `shoplens::BenchRecord`s, one
# in bench/data_bench.h and one in a new header, crashed `bench-data` in the other's destructor.
# Types in anonymous namespaces are private to their file and not counted.
import collections, re, subprocess, sys

files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "include", "src", "tools", "tests"],
                       capture_output=True, text=True, check=True).stdout.split()
type_re = re.compile(r"(?:template\s*<[^>]*>\s*)?(?:struct|class|enum class|enum|union)\s+(?:\[\[\w+\]\]\s+)?(\w+)(?!\w|::)"
                     r"\b(?:\s+final)?\s*(?::[^;{]*)?\{")
defined = collections.defaultdict(list)
for path in (f for f in files if f.endswith((".h", ".cpp"))):
    scopes = []
    for number, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
        if m := re.match(r"namespace\s*([\w:]*)\s*\{", line):
            scopes.append(m.group(1) or None)  # None: anonymous, private to its file
        elif re.match(r"\}\s*//\s*namespace", line) and scopes:
            scopes.pop()
        elif (m := type_re.match(line)) and scopes and None not in scopes:
            defined["::".join(scopes + [m.group(1)])].append(f"{path}:{number}")
clashes = {name: places for name, places in defined.items() if len(places) > 1}
for name, places in sorted(clashes.items()):
    print(f"check_code: {name} is defined in {len(places)} places ({', '.join(places)}): one program, one definition")
print(f"check_code: {len(defined)} namespace-level types, {len(clashes)} defined twice")
sys.exit(1 if clashes else 0)
