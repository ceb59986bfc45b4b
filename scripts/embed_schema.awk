# embed_schema.awk — store/schema.sql as C string macros for store/schema.c (the Makefile
# writes them to BUILD/store/schema_sql.h): SCHEMA_BASE up to the first line
# "-- ---- version N ...", then SCHEMA_VN from each such line to the next.
BEGIN { print "/* Generated from store/schema.sql by scripts/embed_schema.awk: do not edit. */"
        printf "#define SCHEMA_BASE \\\n" }
/^-- ---- version [0-9]+ / { printf "    \"\"\n\n#define SCHEMA_V%s \\\n", $4 }
{ gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); printf "    \"%s\\n\" \\\n", $0 }
END { print "    \"\"" }
