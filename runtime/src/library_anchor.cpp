// libgemmtune is assembled from the component libraries (see the top-level CMakeLists.txt);
// this file only gives the shared-library target a source of its own.
namespace gemmtune {
extern const char* const library_name = "gemmtune";
}  // namespace gemmtune
