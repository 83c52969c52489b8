# xgrammar's C++ core (Apache-2.0), built from its PyPI sdist that scripts/fetch_xgrammar.sh keeps
# in a git-ignored cache. Only cpp/*.cc, cpp/support and cpp/converter_ext: the Python bindings
# (cpp/tvm_ffi) are left out. Their flags (-Werror, -flto) are not ours; warnings are silenced.
set(CACTUS_XGRAMMAR_VERSION 0.2.9)
set(CACTUS_XGRAMMAR_CACHE "$ENV{HOME}/.cache/cactus/xgrammar" CACHE PATH "where fetch_xgrammar.sh unpacks the sdist")
set(CACTUS_XGRAMMAR_DIR "${CACTUS_XGRAMMAR_CACHE}/xgrammar-${CACTUS_XGRAMMAR_VERSION}")
if(NOT EXISTS "${CACTUS_XGRAMMAR_DIR}/cpp/grammar_matcher.cc")
  message(STATUS "xgrammar ${CACTUS_XGRAMMAR_VERSION}: fetching the sdist into ${CACTUS_XGRAMMAR_CACHE}")
  execute_process(COMMAND ${CMAKE_SOURCE_DIR}/scripts/fetch_xgrammar.sh ${CACTUS_XGRAMMAR_CACHE}
                  RESULT_VARIABLE xgr_rc)
  if(NOT xgr_rc EQUAL 0 OR NOT EXISTS "${CACTUS_XGRAMMAR_DIR}/cpp/grammar_matcher.cc")
    message(FATAL_ERROR "xgrammar sources missing in ${CACTUS_XGRAMMAR_DIR}: run scripts/fetch_xgrammar.sh")
  endif()
endif()
file(GLOB xgr_sources "${CACTUS_XGRAMMAR_DIR}/cpp/*.cc" "${CACTUS_XGRAMMAR_DIR}/cpp/support/*.cc"
     "${CACTUS_XGRAMMAR_DIR}/cpp/converter_ext/*.cc")
add_library(cactus_xgrammar OBJECT ${xgr_sources})
target_include_directories(cactus_xgrammar SYSTEM PUBLIC "${CACTUS_XGRAMMAR_DIR}/include"
  "${CACTUS_XGRAMMAR_DIR}/3rdparty/picojson" "${CACTUS_XGRAMMAR_DIR}/3rdparty/dlpack/include")
target_compile_definitions(cactus_xgrammar PUBLIC XGRAMMAR_ENABLE_CPPTRACE=0)
target_compile_options(cactus_xgrammar PRIVATE -w)
if(CACTUS_SANITIZE)
  # AddressSanitizer stays on; UBSan's abort-on-report is for our code, not the vendored library.
  target_compile_options(cactus_xgrammar PRIVATE -fno-sanitize=undefined)
endif()
