# Installing symm for other projects: headers, libsymm, symmrun and symm-info
# (their own install() calls), plus
#   <libdir>/cmake/symm/   find_package(symm) -> symm::symm, symm::device
#   <libdir>/pkgconfig/symm.pc
# examples/c/ is a project that builds against this install.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(_symm_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/symm)
install(EXPORT symm-targets NAMESPACE symm:: FILE symmTargets.cmake DESTINATION ${_symm_cmake_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/symmConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/symmConfig.cmake INSTALL_DESTINATION ${_symm_cmake_dir}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_BINDIR CMAKE_INSTALL_LIBDIR)
# 0.x: a minor release may change the API, so only the same minor version matches.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/symmConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/symmConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/symmConfigVersion.cmake
  DESTINATION ${_symm_cmake_dir})

# The .pc file finds the prefix from its own folder, so the install can move.
file(RELATIVE_PATH SYMM_PC_UP /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
string(REGEX REPLACE "/$" "" SYMM_PC_UP "${SYMM_PC_UP}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/symm.pc.in ${CMAKE_CURRENT_BINARY_DIR}/symm.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/symm.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
