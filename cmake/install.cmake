# cmake --install: the headers, libqmm.a and libqmm.so, the qmm tool, qmm.pc (pkg-config) and a
# CMake package (find_package(qmm) -> qmm::qmm, the shared library when built, else the static
# one; qmm::qmm_static always). Both carry the dependencies: the tokenizer's pkg-config modules
# and, in a CUDA build, cudart and cuBLAS (what a static link needs; the .so records its own).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(qmm_install_targets qmm_lib qmm_cli)
set_target_properties(qmm_lib PROPERTIES EXPORT_NAME qmm_static)
if(QMM_SHARED)
  list(APPEND qmm_install_targets qmm_shared)
  set_target_properties(qmm_shared PROPERTIES EXPORT_NAME qmm)
endif()
install(TARGETS ${qmm_install_targets} EXPORT qmmTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(EXPORT qmmTargets NAMESPACE qmm:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/qmm)

# pkg-config: the shared library by default; `pkg-config --static` adds what libqmm.a needs
set(QMM_PC_LIBS_PRIVATE "-lpthread -lm")
if(QMM_HAVE_CUDA)
  string(APPEND QMM_PC_LIBS_PRIVATE
         " -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -lcublas -lstdc++ -ldl -lrt")
endif()
configure_file(cmake/qmm.pc.in ${CMAKE_BINARY_DIR}/qmm.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/qmm.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

configure_package_config_file(cmake/qmmConfig.cmake.in ${CMAKE_BINARY_DIR}/qmmConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/qmm)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/qmmConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/qmmConfig.cmake ${CMAKE_BINARY_DIR}/qmmConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/qmm)
