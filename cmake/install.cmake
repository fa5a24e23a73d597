# Install rules: the libraries a program needs to plan and run collectives, their headers, the
# flexplan and flexbench programs, a CMake package (find_package(flexplan): flexplan::runtime,
# flexplan::planner, ...) and a pkg-config file (flexplan.pc). Included last by the top level.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(FLEXPLAN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/flexplan)
# Headers keep their include paths ("runtime/communicator.hpp") under include/flexplan, so that
# the project's own includes resolve from an installed tree as they do from the sources.
set(FLEXPLAN_INSTALL_HEADERDIR ${CMAKE_INSTALL_INCLUDEDIR}/flexplan)

# Library targets, each exported as flexplan::<name>. flexplan_runtime links flexplan_sparse
# (the sparse all-reduce's MSTopK), so the package carries it: a link line without it fails.
set(FLEXPLAN_EXPORTED_LIBRARIES
    flexplan_topology:topology flexplan_sparse:sparse flexplan_ir:ir flexplan_codegen:codegen
    flexplan_planner:planner flexplan_codegen_pictures:codegen_pictures flexplan_runtime:runtime)
# The GPU backend's targets, where this build has them.
foreach(pair flexplan_gpu_core:gpu_core flexplan_device_emulation:device_emulation
             flexplan_gpu_emulated:gpu_emulated flexplan_gpu_kernels:gpu_kernels
             flexplan_gpu_cuda:gpu_cuda flexplan_sparse_cuda:sparse_cuda)
  string(REPLACE ":" ";" parts ${pair})
  list(GET parts 0 target)
  if(TARGET ${target})
    list(APPEND FLEXPLAN_EXPORTED_LIBRARIES ${pair})
  endif()
endforeach()

set(FLEXPLAN_INSTALL_TARGETS)
foreach(pair ${FLEXPLAN_EXPORTED_LIBRARIES})
  string(REPLACE ":" ";" parts ${pair})
  list(GET parts 0 target)
  list(GET parts 1 name)
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  list(APPEND FLEXPLAN_INSTALL_TARGETS ${target})
endforeach()

install(TARGETS ${FLEXPLAN_INSTALL_TARGETS} EXPORT flexplanTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${FLEXPLAN_INSTALL_HEADERDIR} ${CMAKE_INSTALL_INCLUDEDIR})
# The installed programs keep the build's library directories outside the system's (CUDA's and
# NCCL's, where flexbench links them) in their run path.
# flexplan-probe goes beside flexplan, which runs it from its own directory (`flexplan probe`).
set_target_properties(flexplan flexbench flexplan-probe PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS flexplan flexbench flexplan-probe RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Public headers of the installed libraries (the CLI's, whatif's and the GPU ones stay out
# unless built and exported).
foreach(dir topology sparse ir codegen planner runtime)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir} DESTINATION ${FLEXPLAN_INSTALL_HEADERDIR}
          FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h"
          PATTERN "gpu" EXCLUDE PATTERN "cuda" EXCLUDE)
endforeach()
if(TARGET flexplan_gpu_core)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/gpu DESTINATION ${FLEXPLAN_INSTALL_HEADERDIR}/runtime
          FILES_MATCHING PATTERN "*.hpp" PATTERN "*.cuh")
endif()
if(TARGET flexplan_sparse_cuda)
  install(FILES ${PROJECT_SOURCE_DIR}/sparse/cuda/mstopk_cuda.hpp
          DESTINATION ${FLEXPLAN_INSTALL_HEADERDIR}/sparse/cuda)
endif()
install(FILES ${PROJECT_BINARY_DIR}/generated/flexplan/version.hpp DESTINATION ${FLEXPLAN_INSTALL_HEADERDIR})

install(EXPORT flexplanTargets NAMESPACE flexplan:: DESTINATION ${FLEXPLAN_INSTALL_CMAKEDIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/flexplanConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/package/flexplanConfig.cmake
                              INSTALL_DESTINATION ${FLEXPLAN_INSTALL_CMAKEDIR})
# 0.x: a minor release may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/flexplanConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/package/flexplanConfig.cmake
              ${PROJECT_BINARY_DIR}/package/flexplanConfigVersion.cmake
        DESTINATION ${FLEXPLAN_INSTALL_CMAKEDIR})

# pkg-config: prefix found from the .pc file's own place, so `cmake --install --prefix` anywhere
# gives a working file. Static libraries: every dependency goes into Requires and Libs.
file(RELATIVE_PATH FLEXPLAN_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" FLEXPLAN_PC_TO_PREFIX "${FLEXPLAN_PC_TO_PREFIX}")
set(FLEXPLAN_PC_DL "")
foreach(lib ${CMAKE_DL_LIBS})
  string(APPEND FLEXPLAN_PC_DL " -l${lib}")
endforeach()
configure_file(${CMAKE_CURRENT_LIST_DIR}/flexplan.pc.in ${PROJECT_BINARY_DIR}/package/flexplan.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/package/flexplan.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# `cpack -G DEB` in the build directory: one package of all the above, installed under /usr.
set(CPACK_PACKAGE_NAME flexplan)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "topology-aware collective planner, compiler and runtime")
set(CPACK_PACKAGE_CONTACT "flexplan maintainers")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# The static libraries' users compile against these headers and link these libraries.
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libboost-graph-dev, nlohmann-json3-dev, libfmt-dev, libucx-dev, libopenmpi-dev, coinor-libclp-dev, pkg-config")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # the programs' own shared libraries, from dpkg-shlibdeps
include(CPack)
