# SPDX-License-Identifier: Apache-2.0
# The build's version (included by the top-level CMakeLists.txt; tests/version/
# test_version_cmake.sh runs it in a scratch project). Sets AS_VERSION and AS_GIT_COMMIT
# and writes ${CMAKE_BINARY_DIR}/gen/as_version.h from src/common/as_version.h.in.
#
# One version for every component (docs/development.md, "Versions"): hack/version.sh
# (git describe) at configure time, PROJECT_VERSION without git (a source tarball, an
# image build without .git), or AS_VERSION_OVERRIDE when set. It lands in the generated
# header as_version.h (AS_VERSION, AS_GIT_COMMIT), rewritten only when it changes, so a
# new commit recompiles the few files that include it, not the whole tree.
set(AS_VERSION_OVERRIDE "" CACHE STRING "Version to build instead of hack/version.sh's")
set(AS_VERSION ${PROJECT_VERSION})
set(AS_GIT_COMMIT unknown)
if(AS_VERSION_OVERRIDE)
  set(AS_VERSION ${AS_VERSION_OVERRIDE})
else()
  execute_process(COMMAND sh ${CMAKE_SOURCE_DIR}/hack/version.sh
                  OUTPUT_VARIABLE as_v RESULT_VARIABLE as_rc ERROR_QUIET
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(as_rc EQUAL 0 AND as_v MATCHES "^[0-9]+\\.[0-9]+\\.[0-9]+[0-9A-Za-z.+-]*$")
    set(AS_VERSION ${as_v})
  endif()
  execute_process(COMMAND git -C ${CMAKE_SOURCE_DIR} rev-parse HEAD
                  OUTPUT_VARIABLE as_c RESULT_VARIABLE as_rc ERROR_QUIET
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(as_rc EQUAL 0 AND as_c MATCHES "^[0-9a-f]+$")
    set(AS_GIT_COMMIT ${as_c})
    # A new commit, checkout or tag re-runs this configure step on the next build, so
    # that --version names the commit built (not the one configured first): HEAD, the
    # branch it points to and that branch's directory (a packed branch has no file of
    # its own until its next commit writes one there), and the packed refs and tags.
    # A missing file cannot be a dependency: Ninja would re-run the step on every build.
    execute_process(COMMAND git -C ${CMAKE_SOURCE_DIR} symbolic-ref -q HEAD
                    OUTPUT_VARIABLE as_ref ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    set(as_deps HEAD packed-refs refs/tags)
    if(as_ref)
      get_filename_component(as_ref_dir ${as_ref} DIRECTORY)
      list(APPEND as_deps ${as_ref} ${as_ref_dir})
    endif()
    foreach(p ${as_deps})
      execute_process(COMMAND git -C ${CMAKE_SOURCE_DIR} rev-parse --path-format=absolute
                              --git-path ${p}
                      OUTPUT_VARIABLE as_p RESULT_VARIABLE as_rc ERROR_QUIET
                      OUTPUT_STRIP_TRAILING_WHITESPACE)
      if(as_rc EQUAL 0 AND EXISTS "${as_p}")
        set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${as_p}")
      endif()
    endforeach()
  endif()
endif()
if(NOT AS_VERSION MATCHES "^[0-9A-Za-z.+-]+$")
  message(FATAL_ERROR "AS_VERSION_OVERRIDE '${AS_VERSION}': only [0-9A-Za-z.+-]")
endif()
message(STATUS "Agent Sandbox version ${AS_VERSION}")
configure_file(${CMAKE_SOURCE_DIR}/src/common/as_version.h.in
               ${CMAKE_BINARY_DIR}/gen/as_version.h @ONLY)
