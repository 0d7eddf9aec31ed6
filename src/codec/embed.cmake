# Writes OUT, a C file defining `const char NAME[]` for each pair of
# NAMES/FILES given (-D NAMES=a;b -D FILES=x;y -D OUT=file.c): the files'
# bytes, NUL-terminated. The codec's CUDA source reaches NVRTC this way.
list(LENGTH NAMES count)
math(EXPR last "${count} - 1")
set(text "/* Generated from the codec's kernel sources by src/codec/embed.cmake. */\n")
foreach(i RANGE ${last})
  list(GET NAMES ${i} name)
  list(GET FILES ${i} file)
  file(READ "${file}" hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
  string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" hex "${hex}")
  string(APPEND text "const unsigned char ${name}[] = {\n${hex}0x00};\n")
endforeach()
file(WRITE "${OUT}.tmp" "${text}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
