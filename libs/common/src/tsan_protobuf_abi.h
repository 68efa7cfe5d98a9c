// Forced into every C++ translation unit of a ThreadSanitizer build
// (-include, see the top-level CMakeLists.txt).
//
// Debian's libprotobuf is built without ThreadSanitizer, but its map_field.h
// gives MapFieldBase two extra members (seq1_, seq2_) whenever
// __SANITIZE_THREAD__ is defined. Instrumented code would then lay out every
// proto map field 8 bytes longer than the library does: the library's
// MapFieldBase::SyncRepeatedFieldWithMap (reflection over a map field, as
// codecoctl's YAML printer does) stores repeated_field_ where our inline code
// keeps arena_, and our code then dereferences a null repeated_field_ (a
// SEGV in codecoctl and codecoctl_apps_test under TSan only). Including the
// header once with the macro hidden gives the library's layout everywhere;
// its include guard keeps every later #include of it a no-op.
#pragma once

#ifdef __cplusplus
#pragma push_macro("__SANITIZE_THREAD__")
#undef __SANITIZE_THREAD__
#include <google/protobuf/map_field.h>
#pragma pop_macro("__SANITIZE_THREAD__")
#endif
