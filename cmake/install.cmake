# Installs headers, libaxrt, the CMake package (axrt::axrt) and pkg-config.
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/axrt
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")

install(TARGETS axrt EXPORT axrtTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(AXRT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/axrt)
# The transport of groups across processes, beside libaxrt (where libaxrt
# looks for it).
if(TARGET axrt_gloo)
  install(TARGETS axrt_gloo LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(EXPORT axrtTargets
  NAMESPACE axrt::
  FILE axrtTargets.cmake
  DESTINATION ${AXRT_CMAKE_DIR})

configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/axrtConfig.cmake.in
  ${PROJECT_BINARY_DIR}/axrtConfig.cmake
  INSTALL_DESTINATION ${AXRT_CMAKE_DIR})
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/axrtConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMajorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/axrtConfig.cmake
  ${PROJECT_BINARY_DIR}/axrtConfigVersion.cmake
  DESTINATION ${AXRT_CMAKE_DIR})

# The .pc file finds its prefix relative to itself (${pcfiledir}), so it stays
# right when the install prefix is chosen at install time (`cmake --install
# --prefix`) or the tree is moved, as the CMake package does. Absolute
# install directories cannot move and are written as they are.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(AXRT_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(AXRT_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
  set(AXRT_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  file(RELATIVE_PATH _axrt_pc_up "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
  string(REGEX REPLACE "/$" "" _axrt_pc_up "${_axrt_pc_up}")
  set(AXRT_PC_PREFIX "\${pcfiledir}/${_axrt_pc_up}")
  set(AXRT_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(AXRT_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/axrt.pc.in ${PROJECT_BINARY_DIR}/axrt.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/axrt.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The `axrt` command-line tool.
if(TARGET axrt_cli)
  install(TARGETS axrt_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
