# Writes OUT, a C file defining td_server_page (the bytes of IN, NUL-terminated) and td_server_page_len: the web
# page is compiled into the binary. Run as `cmake -DIN=page.html -DOUT=page_html.c -P embed.cmake`.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n2)
math(EXPR n "${n2} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x..,){32})" "\\1\n" bytes "${bytes}")
file(WRITE ${OUT} "/* Generated from src/server/page.html by src/server/embed.cmake: do not edit. */\n#include <stddef.h>\n"
     "extern const char td_server_page[];\nextern const size_t td_server_page_len;\n"
     "const char td_server_page[] = {\n${bytes}0x00};\nconst size_t td_server_page_len = ${n};\n")
