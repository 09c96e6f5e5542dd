# Warnings, sanitizers and assert switches live in one INTERFACE target that every
# mxtasking target links privately; nothing here touches global flags.
add_library(mx_build_flags INTERFACE)
target_compile_features(mx_build_flags INTERFACE cxx_std_20)
target_compile_options(mx_build_flags INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion -Wnon-virtual-dtor
  -Wold-style-cast -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough
  $<$<BOOL:${MX_WERROR}>:-Werror>
  # GCC 12 at -O2/-O3 reports -Wrestrict inside libstdc++'s std::string copy for ordinary
  # string building (GCC bug 105329, fixed in GCC 13); it has only ever been a false positive here.
  $<$<CXX_COMPILER_ID:GNU>:-Wno-restrict>)
if(MX_SANITIZE)
  list(JOIN MX_SANITIZE "," _mx_san)
  target_compile_options(mx_build_flags INTERFACE -fsanitize=${_mx_san} -fno-omit-frame-pointer
                         -fno-sanitize-recover=all)
  target_link_options(mx_build_flags INTERFACE -fsanitize=${_mx_san})
endif()
if(MX_ASSERTS)
  target_compile_definitions(mx_build_flags INTERFACE MX_ENABLE_ASSERTS=1)
endif()
install(TARGETS mx_build_flags EXPORT mxtaskingTargets)
