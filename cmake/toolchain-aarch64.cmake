# SPDX-License-Identifier: Apache-2.0
# Cross-compiling for linux/arm64 with Debian's cross toolchain and multiarch libraries:
#   dpkg --add-architecture arm64
#   apt-get install gcc-aarch64-linux-gnu libcurl4-openssl-dev:arm64 libjansson-dev:arm64 ...
#   cmake -B build/release-arm64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake
# (hack/deps.sh --cross installs them; hack/dist.sh uses this file.)
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_STRIP aarch64-linux-gnu-strip)
# Headers and libraries of the arm64 -dev packages live in the multiarch directories
# (/usr/lib/aarch64-linux-gnu, /usr/include/aarch64-linux-gnu); programs run on the host.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr)
# pkg-config: only the arm64 .pc files.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
# Tests built for arm64 run under qemu-user-static.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static)
