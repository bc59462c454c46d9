// The C API without a GPU: the matmul descriptor (defaults, every attribute, every error), the
// element types by name, the checks gemmtune_matmul makes before it needs a GPU, its no-GPU
// failure, and the header as C.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "gemmtune/gemmtune.h"
#include "gemmtune/gemmtune.hpp"
#include "support.hpp"

namespace {

// The codes are data_types.h's, whatever the enum's spelling.
static_assert(GEMMTUNE_F32 == GEMMTUNE_TYPE_F32 && GEMMTUNE_F16 == GEMMTUNE_TYPE_F16 &&
              GEMMTUNE_BF16 == GEMMTUNE_TYPE_BF16 && GEMMTUNE_E4M3 == GEMMTUNE_TYPE_E4M3 &&
              GEMMTUNE_E5M2 == GEMMTUNE_TYPE_E5M2);

struct Attribute {
  gemmtune_matmul_attribute attr;
  const char* name;
  int32_t default_value;
  std::vector<int32_t> valid;    // every value it takes
  std::vector<int32_t> invalid;  // values it refuses
};

const std::vector<Attribute>& attributes() {
  static const std::vector<int32_t> types{GEMMTUNE_F32, GEMMTUNE_F16, GEMMTUNE_BF16, GEMMTUNE_E4M3,
                                          GEMMTUNE_E5M2};
  static const std::vector<int32_t> bad_types{-1, GEMMTUNE_TYPE_COUNT, 1000};
  static const std::vector<Attribute> all{
      {GEMMTUNE_MATMUL_DESC_A_TYPE, "GEMMTUNE_MATMUL_DESC_A_TYPE", GEMMTUNE_F32, types, bad_types},
      {GEMMTUNE_MATMUL_DESC_B_TYPE, "GEMMTUNE_MATMUL_DESC_B_TYPE", GEMMTUNE_F32, types, bad_types},
      {GEMMTUNE_MATMUL_DESC_C_TYPE, "GEMMTUNE_MATMUL_DESC_C_TYPE", GEMMTUNE_F32, types, bad_types},
      {GEMMTUNE_MATMUL_DESC_D_TYPE, "GEMMTUNE_MATMUL_DESC_D_TYPE", GEMMTUNE_F32, types, bad_types},
      {GEMMTUNE_MATMUL_DESC_ACC_TYPE, "GEMMTUNE_MATMUL_DESC_ACC_TYPE", GEMMTUNE_F32, types,
       bad_types},
      {GEMMTUNE_MATMUL_DESC_SCALING,
       "GEMMTUNE_MATMUL_DESC_SCALING",
       GEMMTUNE_SCALING_NONE,
       {GEMMTUNE_SCALING_NONE, GEMMTUNE_SCALING_TENSOR, GEMMTUNE_SCALING_ROW,
        GEMMTUNE_SCALING_BLOCK},
       {-1, 4, 7}},
      {GEMMTUNE_MATMUL_DESC_OP_A,
       "GEMMTUNE_MATMUL_DESC_OP_A",
       GEMMTUNE_OP_N,
       {GEMMTUNE_OP_N, GEMMTUNE_OP_T},
       {-1, 2}},
      {GEMMTUNE_MATMUL_DESC_OP_B,
       "GEMMTUNE_MATMUL_DESC_OP_B",
       GEMMTUNE_OP_N,
       {GEMMTUNE_OP_N, GEMMTUNE_OP_T},
       {-1, 2}},
      // Out-of-range groups are refused in words of their own (GroupsAreBoundedByKMaxGroups).
      {GEMMTUNE_MATMUL_DESC_GROUPS, "GEMMTUNE_MATMUL_DESC_GROUPS", 0, {0, 1, 8, 128, 4096}, {}},
      {GEMMTUNE_MATMUL_DESC_GROUP_LAYOUT,
       "GEMMTUNE_MATMUL_DESC_GROUP_LAYOUT",
       GEMMTUNE_GROUP_LAYOUT_CONTIGUOUS,
       {GEMMTUNE_GROUP_LAYOUT_CONTIGUOUS, GEMMTUNE_GROUP_LAYOUT_MASKED},
       {-1, 2, 100}},
      {GEMMTUNE_MATMUL_DESC_ACCUMULATION,
       "GEMMTUNE_MATMUL_DESC_ACCUMULATION",
       GEMMTUNE_ACCUMULATION_PRECISE,
       {GEMMTUNE_ACCUMULATION_PRECISE, GEMMTUNE_ACCUMULATION_FAST},
       {-1, 2, 100}},
      {GEMMTUNE_MATMUL_DESC_BIAS,
       "GEMMTUNE_MATMUL_DESC_BIAS",
       GEMMTUNE_BIAS_NONE,
       {GEMMTUNE_BIAS_NONE, GEMMTUNE_BIAS_M, GEMMTUNE_BIAS_N},
       {-1, 3, 100}},
      {GEMMTUNE_MATMUL_DESC_ACTIVATION,
       "GEMMTUNE_MATMUL_DESC_ACTIVATION",
       GEMMTUNE_ACTIVATION_IDENTITY,
       {GEMMTUNE_ACTIVATION_IDENTITY, GEMMTUNE_ACTIVATION_RELU, GEMMTUNE_ACTIVATION_GELU,
        GEMMTUNE_ACTIVATION_GELU_TANH, GEMMTUNE_ACTIVATION_SILU},
       {-1, 5, 100}},
      {GEMMTUNE_MATMUL_DESC_GATE,
       "GEMMTUNE_MATMUL_DESC_GATE",
       GEMMTUNE_GATE_NONE,
       {GEMMTUNE_GATE_NONE, GEMMTUNE_GATE_HALVES, GEMMTUNE_GATE_INTERLEAVED},
       {-1, 3, 100}},
      {GEMMTUNE_MATMUL_DESC_PRECISION,
       "GEMMTUNE_MATMUL_DESC_PRECISION",
       GEMMTUNE_PRECISION_DEFAULT,
       {GEMMTUNE_PRECISION_DEFAULT, GEMMTUNE_PRECISION_EXACT, GEMMTUNE_PRECISION_TF32,
        GEMMTUNE_PRECISION_TF32X3},
       {-2, 3, 100}},
      {GEMMTUNE_MATMUL_DESC_AUX, "GEMMTUNE_MATMUL_DESC_AUX", 0, {0, 1}, {-1, 2, 100}},
  };
  return all;
}

// A descriptor for one test.
class Desc {
 public:
  Desc() {
    EXPECT_EQ(gemmtune_matmul_desc_create(&desc_), GEMMTUNE_SUCCESS) << gemmtune_last_error();
  }
  ~Desc() { gemmtune_matmul_desc_destroy(desc_); }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  operator gemmtune_matmul_desc() const { return desc_; }

  gemmtune_status set(gemmtune_matmul_attribute attr, int32_t value) {
    return gemmtune_matmul_desc_set_attribute(desc_, attr, &value, sizeof value);
  }
  int32_t get(gemmtune_matmul_attribute attr) const {
    int32_t value = -12345;
    size_t written = 0;
    EXPECT_EQ(gemmtune_matmul_desc_get_attribute(desc_, attr, &value, sizeof value, &written),
              GEMMTUNE_SUCCESS)
        << gemmtune_last_error();
    EXPECT_EQ(written, sizeof(int32_t));
    return value;
  }
  std::vector<int32_t> all() const {
    std::vector<int32_t> out;
    for (const auto& a : attributes()) out.push_back(get(a.attr));
    return out;
  }

 private:
  gemmtune_matmul_desc desc_ = nullptr;
};

std::string last_error() {
  return gemmtune_last_error();
}

// `status` is INVALID_ARGUMENT and the message holds every one of `parts`.
void expect_invalid(gemmtune_status status, const std::vector<std::string>& parts) {
  EXPECT_EQ(status, GEMMTUNE_ERROR_INVALID_ARGUMENT) << last_error();
  for (const auto& part : parts)
    EXPECT_NE(last_error().find(part), std::string::npos)
        << "'" << last_error() << "' does not say '" << part << "'";
}

TEST(CApiMatmulDesc, DefaultsAreF32EverywhereNoScalingAndNN) {
  Desc d;
  for (const auto& a : attributes()) EXPECT_EQ(d.get(a.attr), a.default_value) << a.name;
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_A_TYPE), GEMMTUNE_F32);
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_OP_B), GEMMTUNE_OP_N);
}

TEST(CApiMatmulDesc, EveryAttributeRoundTripsAndLeavesTheOthersAlone) {
  for (const auto& a : attributes()) {
    for (int32_t value : a.valid) {
      Desc d;
      std::vector<int32_t> expected = d.all();
      ASSERT_EQ(d.set(a.attr, value), GEMMTUNE_SUCCESS) << a.name << " " << last_error();
      EXPECT_EQ(last_error(), "");
      expected[size_t(&a - attributes().data())] = value;
      EXPECT_EQ(d.all(), expected) << a.name << " = " << value;
    }
  }
  // All of them at once, each to a value other than its default where there is one.
  Desc d;
  const std::vector<int32_t> values{GEMMTUNE_E4M3,
                                    GEMMTUNE_E5M2,
                                    GEMMTUNE_BF16,
                                    GEMMTUNE_BF16,
                                    GEMMTUNE_F16,
                                    GEMMTUNE_SCALING_BLOCK,
                                    GEMMTUNE_OP_T,
                                    GEMMTUNE_OP_T,
                                    128,
                                    GEMMTUNE_GROUP_LAYOUT_MASKED,
                                    GEMMTUNE_ACCUMULATION_FAST,
                                    GEMMTUNE_BIAS_N,
                                    GEMMTUNE_ACTIVATION_GELU_TANH,
                                    GEMMTUNE_GATE_INTERLEAVED,
                                    GEMMTUNE_PRECISION_TF32X3,
                                    1};
  for (size_t i = 0; i < attributes().size(); ++i)
    ASSERT_EQ(d.set(attributes()[i].attr, values[i]), GEMMTUNE_SUCCESS) << last_error();
  EXPECT_EQ(d.all(), values);
}

TEST(CApiMatmulDesc, DescriptorsAreIndependent) {
  Desc one, two;
  ASSERT_EQ(one.set(GEMMTUNE_MATMUL_DESC_B_TYPE, GEMMTUNE_E5M2), GEMMTUNE_SUCCESS);
  EXPECT_EQ(one.get(GEMMTUNE_MATMUL_DESC_B_TYPE), GEMMTUNE_E5M2);
  EXPECT_EQ(two.get(GEMMTUNE_MATMUL_DESC_B_TYPE), GEMMTUNE_F32);
}

TEST(CApiMatmulDesc, SizeZeroAsksForTheSize) {
  Desc d;
  int32_t untouched = 77;
  size_t written = 0;
  EXPECT_EQ(
      gemmtune_matmul_desc_get_attribute(d, GEMMTUNE_MATMUL_DESC_OP_A, &untouched, 0, &written),
      GEMMTUNE_SUCCESS);
  EXPECT_EQ(written, sizeof(int32_t));
  EXPECT_EQ(untouched, 77);
  written = 0;  // the value may be NULL then
  EXPECT_EQ(
      gemmtune_matmul_desc_get_attribute(d, GEMMTUNE_MATMUL_DESC_SCALING, nullptr, 0, &written),
      GEMMTUNE_SUCCESS);
  EXPECT_EQ(written, sizeof(int32_t));
  // written may be NULL when the size is right.
  int32_t value = -1;
  EXPECT_EQ(gemmtune_matmul_desc_get_attribute(d, GEMMTUNE_MATMUL_DESC_C_TYPE, &value, sizeof value,
                                               nullptr),
            GEMMTUNE_SUCCESS);
  EXPECT_EQ(value, GEMMTUNE_F32);
}

TEST(CApiMatmulDesc, UnknownValuesAreRefusedByNameAndChangeNothing) {
  for (const auto& a : attributes()) {
    for (int32_t value : a.invalid) {
      Desc d;
      const std::vector<int32_t> before = d.all();
      expect_invalid(d.set(a.attr, value), {a.name, "unknown", std::to_string(value)});
      EXPECT_EQ(d.all(), before) << a.name << " = " << value;
    }
  }
  Desc d;
  expect_invalid(d.set(GEMMTUNE_MATMUL_DESC_A_TYPE, 9), {"unknown data type code 9", "e5m2"});
  expect_invalid(d.set(GEMMTUNE_MATMUL_DESC_OP_B, 2), {"unknown op 2", "GEMMTUNE_OP_T"});
  expect_invalid(d.set(GEMMTUNE_MATMUL_DESC_SCALING, 4),
                 {"unknown scaling 4", "GEMMTUNE_SCALING_BLOCK"});
  expect_invalid(d.set(GEMMTUNE_MATMUL_DESC_GROUP_LAYOUT, 2),
                 {"unknown group layout 2", "GEMMTUNE_GROUP_LAYOUT_CONTIGUOUS (0)",
                  "GEMMTUNE_GROUP_LAYOUT_MASKED (1)"});
  expect_invalid(d.set(GEMMTUNE_MATMUL_DESC_ACCUMULATION, 2),
                 {"GEMMTUNE_MATMUL_DESC_ACCUMULATION: unknown accumulation 2",
                  "GEMMTUNE_ACCUMULATION_PRECISE (0)", "GEMMTUNE_ACCUMULATION_FAST (1)"});
  expect_invalid(d.set(GEMMTUNE_MATMUL_DESC_BIAS, 3),
                 {"GEMMTUNE_MATMUL_DESC_BIAS: unknown bias 3", "GEMMTUNE_BIAS_NONE (0)",
                  "GEMMTUNE_BIAS_M (1)", "GEMMTUNE_BIAS_N (2)"});
  expect_invalid(d.set(GEMMTUNE_MATMUL_DESC_ACTIVATION, 5),
                 {"GEMMTUNE_MATMUL_DESC_ACTIVATION: unknown activation 5",
                  "GEMMTUNE_ACTIVATION_IDENTITY (0)", "GEMMTUNE_ACTIVATION_SILU (4)", "gelu_tanh"});
  expect_invalid(d.set(GEMMTUNE_MATMUL_DESC_GATE, 3),
                 {"GEMMTUNE_MATMUL_DESC_GATE: unknown gate 3", "GEMMTUNE_GATE_NONE (0)",
                  "GEMMTUNE_GATE_HALVES (1)", "GEMMTUNE_GATE_INTERLEAVED (2)"});
  expect_invalid(d.set(GEMMTUNE_MATMUL_DESC_PRECISION, 3),
                 {"GEMMTUNE_MATMUL_DESC_PRECISION: unknown precision 3",
                  "GEMMTUNE_PRECISION_DEFAULT (-1)", "GEMMTUNE_PRECISION_EXACT (0)",
                  "GEMMTUNE_PRECISION_TF32 (1)", "GEMMTUNE_PRECISION_TF32X3 (2)"});
}

TEST(CApiMatmulDesc, UnknownAttributesAreRefused) {
  Desc d;
  int32_t value = 0;
  size_t written = 0;
  for (int attr : {-1, 22, 100}) {
    const auto a = static_cast<gemmtune_matmul_attribute>(attr);
    expect_invalid(gemmtune_matmul_desc_set_attribute(d, a, &value, sizeof value),
                   {"unknown matmul descriptor attribute " + std::to_string(attr)});
    expect_invalid(gemmtune_matmul_desc_get_attribute(d, a, &value, sizeof value, &written),
                   {"unknown matmul descriptor attribute " + std::to_string(attr)});
    expect_invalid(gemmtune_matmul_desc_get_attribute(d, a, nullptr, 0, &written),
                   {"unknown matmul descriptor attribute " + std::to_string(attr)});
  }
  EXPECT_EQ(written, 0u);
}

TEST(CApiMatmulDesc, UnknownAttributesNameTheKnownRange) {
  Desc d;
  int32_t value = 0;
  expect_invalid(gemmtune_matmul_desc_set_attribute(d, static_cast<gemmtune_matmul_attribute>(22),
                                                    &value, sizeof value),
                 {"GEMMTUNE_MATMUL_DESC_A_TYPE (0) to GEMMTUNE_MATMUL_DESC_AUX_POINTER (21)"});
}

TEST(CApiMatmulDesc, GroupsAreBoundedByKMaxGroups) {
  Desc d;
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_GROUPS, 64), GEMMTUNE_SUCCESS) << last_error();
  const std::vector<int32_t> before = d.all();
  for (int32_t groups : {-1, 4097, 1 << 30})
    expect_invalid(d.set(GEMMTUNE_MATMUL_DESC_GROUPS, groups),
                   {"GEMMTUNE_MATMUL_DESC_GROUPS: groups must be 0 (one GEMM) or 1 to 4096 (got " +
                    std::to_string(groups) + ")"});
  EXPECT_EQ(d.all(), before) << "a refused value changes nothing";
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_GROUPS), 64);
}

// The scale pointers: a const float* each (the pointer is the value, its address what set and
// get take), NULL by default, any address accepted (the call checks that a scaled call has them).
const float* get_pointer(gemmtune_matmul_desc d, gemmtune_matmul_attribute attr) {
  const float* value = reinterpret_cast<const float*>(0x1234);
  size_t written = 0;
  EXPECT_EQ(gemmtune_matmul_desc_get_attribute(d, attr, &value, sizeof value, &written),
            GEMMTUNE_SUCCESS)
      << last_error();
  EXPECT_EQ(written, sizeof(void*));
  return value;
}

gemmtune_status set_pointer(gemmtune_matmul_desc d, gemmtune_matmul_attribute attr,
                            const float* value) {
  return gemmtune_matmul_desc_set_attribute(d, attr, &value, sizeof value);
}

const float* const kScaleA = reinterpret_cast<const float*>(0x7f0000300000);
const float* const kScaleB = reinterpret_cast<const float*>(0x7f0000300100);

TEST(CApiMatmulDesc, ScalePointersRoundTripAndLeaveTheOthersAlone) {
  Desc d;
  EXPECT_EQ(get_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER), nullptr);
  EXPECT_EQ(get_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_B_POINTER), nullptr);
  const std::vector<int32_t> before = d.all();
  ASSERT_EQ(set_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER, kScaleA), GEMMTUNE_SUCCESS)
      << last_error();
  EXPECT_EQ(last_error(), "");
  EXPECT_EQ(get_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER), kScaleA);
  EXPECT_EQ(get_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_B_POINTER), nullptr);
  ASSERT_EQ(set_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_B_POINTER, kScaleB), GEMMTUNE_SUCCESS);
  EXPECT_EQ(get_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER), kScaleA);
  EXPECT_EQ(get_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_B_POINTER), kScaleB);
  EXPECT_EQ(d.all(), before);  // the int32_t attributes are untouched
  // The int32_t attributes leave the pointers alone.
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_SCALING, GEMMTUNE_SCALING_ROW), GEMMTUNE_SUCCESS);
  EXPECT_EQ(get_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER), kScaleA);
  // NULL unsets one.
  ASSERT_EQ(set_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER, nullptr), GEMMTUNE_SUCCESS);
  EXPECT_EQ(get_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER), nullptr);
  EXPECT_EQ(get_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_B_POINTER), kScaleB);
  // Another descriptor has its own.
  Desc other;
  EXPECT_EQ(get_pointer(other, GEMMTUNE_MATMUL_DESC_SCALE_B_POINTER), nullptr);
  // The size a pointer needs.
  size_t written = 0;
  EXPECT_EQ(gemmtune_matmul_desc_get_attribute(d, GEMMTUNE_MATMUL_DESC_SCALE_B_POINTER, nullptr, 0,
                                               &written),
            GEMMTUNE_SUCCESS);
  EXPECT_EQ(written, sizeof(void*));
}

TEST(CApiMatmulDesc, ScalePointersOfTheWrongSizeAreRefused) {
  Desc d;
  ASSERT_EQ(set_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER, kScaleA), GEMMTUNE_SUCCESS);
  for (const auto& [attr, name] :
       {std::pair{GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER, "GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER"},
        std::pair{GEMMTUNE_MATMUL_DESC_SCALE_B_POINTER, "GEMMTUNE_MATMUL_DESC_SCALE_B_POINTER"}}) {
    int32_t narrow = 0;
    const std::string size = std::to_string(sizeof(void*));
    expect_invalid(gemmtune_matmul_desc_set_attribute(d, attr, &narrow, sizeof narrow),
                   {name, "is a const float*", "(" + size + " bytes), but size is 4"});
    expect_invalid(gemmtune_matmul_desc_set_attribute(d, attr, &narrow, 0), {name, "size is 0"});
    expect_invalid(gemmtune_matmul_desc_set_attribute(d, attr, nullptr, sizeof(void*)),
                   {name, "value is a null pointer"});
    size_t written = 99;
    expect_invalid(gemmtune_matmul_desc_get_attribute(d, attr, &narrow, sizeof narrow, &written),
                   {name, "size is 4"});
    EXPECT_EQ(written, 99u);
    expect_invalid(gemmtune_matmul_desc_get_attribute(d, attr, nullptr, sizeof(void*), &written),
                   {name, "null pointer"});
  }
  EXPECT_EQ(get_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER), kScaleA);  // as it was
  EXPECT_EQ(get_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_B_POINTER), nullptr);
  // An int32_t attribute given a pointer's size says it is an int32_t.
  const float* pointer = kScaleA;
  expect_invalid(
      gemmtune_matmul_desc_set_attribute(d, GEMMTUNE_MATMUL_DESC_SCALING, &pointer, sizeof pointer),
      {"GEMMTUNE_MATMUL_DESC_SCALING is an int32_t (4 bytes)"});
}

// The group ends: a const int32_t*, NULL by default, kept apart from the scale pointers.
const int32_t* get_ends(gemmtune_matmul_desc d) {
  const int32_t* value = reinterpret_cast<const int32_t*>(0x1234);
  size_t written = 0;
  EXPECT_EQ(gemmtune_matmul_desc_get_attribute(d, GEMMTUNE_MATMUL_DESC_GROUP_ENDS_POINTER, &value,
                                               sizeof value, &written),
            GEMMTUNE_SUCCESS)
      << last_error();
  EXPECT_EQ(written, sizeof(void*));
  return value;
}

gemmtune_status set_ends(gemmtune_matmul_desc d, const int32_t* value) {
  return gemmtune_matmul_desc_set_attribute(d, GEMMTUNE_MATMUL_DESC_GROUP_ENDS_POINTER, &value,
                                            sizeof value);
}

const int32_t* const kEnds = reinterpret_cast<const int32_t*>(0x7f0000400000);

TEST(CApiMatmulDesc, GroupEndsRoundTripAndLeaveTheOthersAlone) {
  Desc d;
  EXPECT_EQ(get_ends(d), nullptr);
  ASSERT_EQ(set_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER, kScaleA), GEMMTUNE_SUCCESS);
  const std::vector<int32_t> before = d.all();
  ASSERT_EQ(set_ends(d, kEnds), GEMMTUNE_SUCCESS) << last_error();
  EXPECT_EQ(get_ends(d), kEnds);
  EXPECT_EQ(get_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER), kScaleA);
  EXPECT_EQ(get_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_B_POINTER), nullptr);
  EXPECT_EQ(d.all(), before);
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_GROUPS, 128), GEMMTUNE_SUCCESS);
  EXPECT_EQ(get_ends(d), kEnds);
  ASSERT_EQ(set_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_B_POINTER, kScaleB), GEMMTUNE_SUCCESS);
  EXPECT_EQ(get_ends(d), kEnds);
  ASSERT_EQ(set_ends(d, nullptr), GEMMTUNE_SUCCESS);
  EXPECT_EQ(get_ends(d), nullptr);
  EXPECT_EQ(get_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER), kScaleA);
  size_t written = 0;
  EXPECT_EQ(gemmtune_matmul_desc_get_attribute(d, GEMMTUNE_MATMUL_DESC_GROUP_ENDS_POINTER, nullptr,
                                               0, &written),
            GEMMTUNE_SUCCESS);
  EXPECT_EQ(written, sizeof(void*));
  int32_t narrow = 0;
  expect_invalid(gemmtune_matmul_desc_set_attribute(d, GEMMTUNE_MATMUL_DESC_GROUP_ENDS_POINTER,
                                                    &narrow, sizeof narrow),
                 {"GEMMTUNE_MATMUL_DESC_GROUP_ENDS_POINTER is a const int32_t*", "but size is 4"});
  const int32_t* pointer = kEnds;
  expect_invalid(
      gemmtune_matmul_desc_set_attribute(d, GEMMTUNE_MATMUL_DESC_GROUPS, &pointer, sizeof pointer),
      {"GEMMTUNE_MATMUL_DESC_GROUPS is an int32_t (4 bytes)"});
  EXPECT_EQ(get_ends(d), nullptr);
}

// The group layout: an int32_t, set in any order with the groups and their pointer, each of
// which it leaves alone.
TEST(CApiMatmulDesc, TheGroupLayoutIsAnInt32ApartFromTheGroupsAndTheirPointer) {
  Desc d;
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_GROUP_LAYOUT, GEMMTUNE_GROUP_LAYOUT_MASKED),
            GEMMTUNE_SUCCESS)
      << last_error();  // before the groups: a call checks that there are some
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_GROUPS), 0);
  ASSERT_EQ(set_ends(d, kEnds), GEMMTUNE_SUCCESS);
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_GROUPS, 64), GEMMTUNE_SUCCESS);
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_GROUP_LAYOUT), GEMMTUNE_GROUP_LAYOUT_MASKED);
  EXPECT_EQ(get_ends(d), kEnds);
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_GROUP_LAYOUT, GEMMTUNE_GROUP_LAYOUT_CONTIGUOUS),
            GEMMTUNE_SUCCESS);
  EXPECT_EQ(get_ends(d), kEnds);
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_GROUPS), 64);
  // A refused layout changes nothing.
  const std::vector<int32_t> before = d.all();
  expect_invalid(d.set(GEMMTUNE_MATMUL_DESC_GROUP_LAYOUT, -1),
                 {"GEMMTUNE_MATMUL_DESC_GROUP_LAYOUT: unknown group layout -1"});
  EXPECT_EQ(d.all(), before);
  // Its size is an int32_t's: a pointer's is refused both ways, and size 0 asks for it.
  const int32_t* pointer = kEnds;
  expect_invalid(gemmtune_matmul_desc_set_attribute(d, GEMMTUNE_MATMUL_DESC_GROUP_LAYOUT, &pointer,
                                                    sizeof pointer),
                 {"GEMMTUNE_MATMUL_DESC_GROUP_LAYOUT is an int32_t (4 bytes), but size is " +
                  std::to_string(sizeof pointer)});
  expect_invalid(gemmtune_matmul_desc_get_attribute(d, GEMMTUNE_MATMUL_DESC_GROUP_LAYOUT, &pointer,
                                                    sizeof pointer, nullptr),
                 {"GEMMTUNE_MATMUL_DESC_GROUP_LAYOUT is an int32_t"});
  EXPECT_EQ(pointer, kEnds);
  size_t written = 0;
  EXPECT_EQ(gemmtune_matmul_desc_get_attribute(d, GEMMTUNE_MATMUL_DESC_GROUP_LAYOUT, nullptr, 0,
                                               &written),
            GEMMTUNE_SUCCESS);
  EXPECT_EQ(written, sizeof(int32_t));
  EXPECT_EQ(d.all(), before);
}

// The accumulation: an int32_t set in any order with the types and the scaling (the call checks
// the problem), which it leaves alone.
TEST(CApiMatmulDesc, TheAccumulationIsAnInt32ApartFromTheTypesAndTheScaling) {
  Desc d;
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_ACCUMULATION, GEMMTUNE_ACCUMULATION_FAST), GEMMTUNE_SUCCESS)
      << last_error();  // before float8 and a scaling: set, not judged
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_SCALING), GEMMTUNE_SCALING_NONE);
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_SCALING, GEMMTUNE_SCALING_BLOCK), GEMMTUNE_SUCCESS);
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_A_TYPE, GEMMTUNE_E4M3), GEMMTUNE_SUCCESS);
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_ACCUMULATION), GEMMTUNE_ACCUMULATION_FAST);
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_SCALING), GEMMTUNE_SCALING_BLOCK);
  const std::vector<int32_t> before = d.all();
  expect_invalid(d.set(GEMMTUNE_MATMUL_DESC_ACCUMULATION, 5),
                 {"GEMMTUNE_MATMUL_DESC_ACCUMULATION: unknown accumulation 5"});
  EXPECT_EQ(d.all(), before);
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_ACCUMULATION, GEMMTUNE_ACCUMULATION_PRECISE),
            GEMMTUNE_SUCCESS);
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_ACCUMULATION), GEMMTUNE_ACCUMULATION_PRECISE);
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_SCALING), GEMMTUNE_SCALING_BLOCK);
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_A_TYPE), GEMMTUNE_E4M3);
}

// The precision: an int32_t set in any order with the types (the call checks the problem),
// which it leaves alone; GEMMTUNE_PRECISION_DEFAULT, the library's, until set and when set again.
TEST(CApiMatmulDesc, ThePrecisionIsAnInt32ApartFromTheTypes) {
  Desc d;
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_PRECISION), GEMMTUNE_PRECISION_DEFAULT);
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_PRECISION, GEMMTUNE_PRECISION_TF32), GEMMTUNE_SUCCESS)
      << last_error();
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_A_TYPE, GEMMTUNE_BF16), GEMMTUNE_SUCCESS);  // not judged
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_PRECISION), GEMMTUNE_PRECISION_TF32);
  const std::vector<int32_t> before = d.all();
  expect_invalid(d.set(GEMMTUNE_MATMUL_DESC_PRECISION, -2),
                 {"GEMMTUNE_MATMUL_DESC_PRECISION: unknown precision -2"});
  EXPECT_EQ(d.all(), before);
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_PRECISION, GEMMTUNE_PRECISION_DEFAULT), GEMMTUNE_SUCCESS);
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_PRECISION), GEMMTUNE_PRECISION_DEFAULT);
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_A_TYPE), GEMMTUNE_BF16);
}

// The bias and D pointers: a const void* and a void*, NULL by default, apart from each other and
// from every other attribute.
const void* get_address(gemmtune_matmul_desc d, gemmtune_matmul_attribute attr) {
  const void* value = reinterpret_cast<const void*>(0x1234);
  size_t written = 0;
  EXPECT_EQ(gemmtune_matmul_desc_get_attribute(d, attr, &value, sizeof value, &written),
            GEMMTUNE_SUCCESS)
      << last_error();
  EXPECT_EQ(written, sizeof(void*));
  return value;
}

gemmtune_status set_address(gemmtune_matmul_desc d, gemmtune_matmul_attribute attr,
                            const void* value) {
  return gemmtune_matmul_desc_set_attribute(d, attr, &value, sizeof value);
}

const void* const kBias = reinterpret_cast<const void*>(0x7f0000500000);
void* const kD = reinterpret_cast<void*>(0x7f0000600000);

TEST(CApiMatmulDesc, TheBiasAndDPointersRoundTripAndLeaveTheOthersAlone) {
  Desc d;
  EXPECT_EQ(get_address(d, GEMMTUNE_MATMUL_DESC_BIAS_POINTER), nullptr);
  EXPECT_EQ(get_address(d, GEMMTUNE_MATMUL_DESC_D_POINTER), nullptr);
  ASSERT_EQ(set_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_B_POINTER, kScaleB), GEMMTUNE_SUCCESS);
  ASSERT_EQ(set_ends(d, kEnds), GEMMTUNE_SUCCESS);
  const std::vector<int32_t> before = d.all();
  ASSERT_EQ(set_address(d, GEMMTUNE_MATMUL_DESC_BIAS_POINTER, kBias), GEMMTUNE_SUCCESS)
      << last_error();
  EXPECT_EQ(get_address(d, GEMMTUNE_MATMUL_DESC_BIAS_POINTER), kBias);
  EXPECT_EQ(get_address(d, GEMMTUNE_MATMUL_DESC_D_POINTER), nullptr);
  ASSERT_EQ(set_address(d, GEMMTUNE_MATMUL_DESC_D_POINTER, kD), GEMMTUNE_SUCCESS);
  EXPECT_EQ(get_address(d, GEMMTUNE_MATMUL_DESC_D_POINTER), kD);
  EXPECT_EQ(get_address(d, GEMMTUNE_MATMUL_DESC_BIAS_POINTER), kBias);
  // The other pointers and the int32_t attributes are untouched, and leave these alone.
  EXPECT_EQ(get_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER), nullptr);
  EXPECT_EQ(get_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_B_POINTER), kScaleB);
  EXPECT_EQ(get_ends(d), kEnds);
  EXPECT_EQ(d.all(), before);
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_BIAS, GEMMTUNE_BIAS_M), GEMMTUNE_SUCCESS);
  ASSERT_EQ(set_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER, kScaleA), GEMMTUNE_SUCCESS);
  EXPECT_EQ(get_address(d, GEMMTUNE_MATMUL_DESC_BIAS_POINTER), kBias);
  EXPECT_EQ(get_address(d, GEMMTUNE_MATMUL_DESC_D_POINTER), kD);
  // NULL unsets one; another descriptor has its own.
  ASSERT_EQ(set_address(d, GEMMTUNE_MATMUL_DESC_D_POINTER, nullptr), GEMMTUNE_SUCCESS);
  EXPECT_EQ(get_address(d, GEMMTUNE_MATMUL_DESC_D_POINTER), nullptr);
  EXPECT_EQ(get_address(d, GEMMTUNE_MATMUL_DESC_BIAS_POINTER), kBias);
  Desc other;
  EXPECT_EQ(get_address(other, GEMMTUNE_MATMUL_DESC_BIAS_POINTER), nullptr);
}

TEST(CApiMatmulDesc, TheBiasAndDPointersOfTheWrongSizeAreRefused) {
  Desc d;
  ASSERT_EQ(set_address(d, GEMMTUNE_MATMUL_DESC_BIAS_POINTER, kBias), GEMMTUNE_SUCCESS);
  const std::string size = "(" + std::to_string(sizeof(void*)) + " bytes), but size is 4";
  int32_t narrow = 0;
  expect_invalid(gemmtune_matmul_desc_set_attribute(d, GEMMTUNE_MATMUL_DESC_BIAS_POINTER, &narrow,
                                                    sizeof narrow),
                 {"GEMMTUNE_MATMUL_DESC_BIAS_POINTER is a const void* (a device pointer)", size});
  expect_invalid(
      gemmtune_matmul_desc_set_attribute(d, GEMMTUNE_MATMUL_DESC_D_POINTER, &narrow, sizeof narrow),
      {"GEMMTUNE_MATMUL_DESC_D_POINTER is a void* (a device pointer)", size});
  expect_invalid(
      gemmtune_matmul_desc_set_attribute(d, GEMMTUNE_MATMUL_DESC_D_POINTER, nullptr, sizeof kD),
      {"GEMMTUNE_MATMUL_DESC_D_POINTER: value is a null pointer"});
  size_t written = 0;
  EXPECT_EQ(
      gemmtune_matmul_desc_get_attribute(d, GEMMTUNE_MATMUL_DESC_D_POINTER, nullptr, 0, &written),
      GEMMTUNE_SUCCESS);
  EXPECT_EQ(written, sizeof(void*));
  EXPECT_EQ(get_address(d, GEMMTUNE_MATMUL_DESC_BIAS_POINTER), kBias);  // as it was
  EXPECT_EQ(get_address(d, GEMMTUNE_MATMUL_DESC_D_POINTER), nullptr);
  // The bias and the activation are int32_t values, not pointers.
  expect_invalid(
      gemmtune_matmul_desc_set_attribute(d, GEMMTUNE_MATMUL_DESC_BIAS, &kBias, sizeof kBias),
      {"GEMMTUNE_MATMUL_DESC_BIAS is an int32_t (4 bytes)"});
}

// The epilogue's two parts are set in any order with the types (the call checks the problem),
// and leave each other alone.
TEST(CApiMatmulDesc, TheBiasAndActivationAreInt32sApartFromEachOther) {
  Desc d;
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_ACTIVATION, GEMMTUNE_ACTIVATION_SILU), GEMMTUNE_SUCCESS)
      << last_error();
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_BIAS), GEMMTUNE_BIAS_NONE);
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_BIAS, GEMMTUNE_BIAS_M), GEMMTUNE_SUCCESS);
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_D_TYPE, GEMMTUNE_BF16), GEMMTUNE_SUCCESS);
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_ACTIVATION), GEMMTUNE_ACTIVATION_SILU);
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_BIAS), GEMMTUNE_BIAS_M);
  const std::vector<int32_t> before = d.all();
  expect_invalid(d.set(GEMMTUNE_MATMUL_DESC_ACTIVATION, -1),
                 {"GEMMTUNE_MATMUL_DESC_ACTIVATION: unknown activation -1"});
  expect_invalid(d.set(GEMMTUNE_MATMUL_DESC_BIAS, 7),
                 {"GEMMTUNE_MATMUL_DESC_BIAS: unknown bias 7"});
  EXPECT_EQ(d.all(), before);
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_BIAS, GEMMTUNE_BIAS_NONE), GEMMTUNE_SUCCESS);
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_ACTIVATION), GEMMTUNE_ACTIVATION_SILU);
}

// The gate is a third int32 of the epilogue, set in any order with the other two.
TEST(CApiMatmulDesc, TheGateIsAnInt32ApartFromTheBiasAndActivation) {
  Desc d;
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_GATE, GEMMTUNE_GATE_INTERLEAVED), GEMMTUNE_SUCCESS)
      << last_error();
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_ACTIVATION), GEMMTUNE_ACTIVATION_IDENTITY);
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_BIAS), GEMMTUNE_BIAS_NONE);
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_ACTIVATION, GEMMTUNE_ACTIVATION_GELU), GEMMTUNE_SUCCESS);
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_BIAS, GEMMTUNE_BIAS_M), GEMMTUNE_SUCCESS);
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_GATE), GEMMTUNE_GATE_INTERLEAVED);
  const std::vector<int32_t> before = d.all();
  expect_invalid(d.set(GEMMTUNE_MATMUL_DESC_GATE, -1),
                 {"GEMMTUNE_MATMUL_DESC_GATE: unknown gate -1"});
  EXPECT_EQ(d.all(), before);
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_GATE, GEMMTUNE_GATE_NONE), GEMMTUNE_SUCCESS);
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_ACTIVATION), GEMMTUNE_ACTIVATION_GELU);
  int64_t wide = GEMMTUNE_GATE_HALVES;
  expect_invalid(
      gemmtune_matmul_desc_set_attribute(d, GEMMTUNE_MATMUL_DESC_GATE, &wide, sizeof wide),
      {"GEMMTUNE_MATMUL_DESC_GATE is an int32_t (4 bytes)"});
}

TEST(CApiMatmulDesc, WrongSizesAreRefusedWithTheSizeNeeded) {
  Desc d;
  int64_t wide = GEMMTUNE_BF16;
  int16_t narrow = GEMMTUNE_BF16;
  for (const auto& a : attributes()) {
    expect_invalid(gemmtune_matmul_desc_set_attribute(d, a.attr, &wide, sizeof wide),
                   {a.name, "int32_t (4 bytes)", "size is 8"});
    expect_invalid(gemmtune_matmul_desc_set_attribute(d, a.attr, &narrow, sizeof narrow),
                   {a.name, "size is 2"});
    expect_invalid(gemmtune_matmul_desc_set_attribute(d, a.attr, &narrow, 0),
                   {a.name, "size is 0"});
    size_t written = 99;
    expect_invalid(gemmtune_matmul_desc_get_attribute(d, a.attr, &wide, sizeof wide, &written),
                   {a.name, "size is 8"});
    EXPECT_EQ(written, 99u);  // nothing is written on failure
    // size 0 without `written` is no size query: there is nowhere to put the size.
    expect_invalid(gemmtune_matmul_desc_get_attribute(d, a.attr, &wide, 0, nullptr),
                   {a.name, "size is 0"});
  }
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_A_TYPE), GEMMTUNE_F32);  // nothing was set
}

TEST(CApiMatmulDesc, NullPointersAreRefused) {
  int32_t value = GEMMTUNE_F16;
  size_t written = 0;
  expect_invalid(gemmtune_matmul_desc_create(nullptr), {"desc", "null pointer"});
  expect_invalid(
      gemmtune_matmul_desc_set_attribute(nullptr, GEMMTUNE_MATMUL_DESC_A_TYPE, &value, 4),
      {"matmul descriptor is a null pointer", "gemmtune_matmul_desc_create"});
  expect_invalid(
      gemmtune_matmul_desc_get_attribute(nullptr, GEMMTUNE_MATMUL_DESC_A_TYPE, &value, 4, &written),
      {"matmul descriptor is a null pointer"});
  Desc d;
  expect_invalid(gemmtune_matmul_desc_set_attribute(d, GEMMTUNE_MATMUL_DESC_B_TYPE, nullptr, 4),
                 {"GEMMTUNE_MATMUL_DESC_B_TYPE: value is a null pointer"});
  expect_invalid(
      gemmtune_matmul_desc_get_attribute(d, GEMMTUNE_MATMUL_DESC_B_TYPE, nullptr, 4, &written),
      {"GEMMTUNE_MATMUL_DESC_B_TYPE: value", "null pointer"});
  // Destroying NULL is a no-op, as free(NULL); a success clears the last error.
  EXPECT_EQ(gemmtune_matmul_desc_destroy(nullptr), GEMMTUNE_SUCCESS);
  EXPECT_EQ(last_error(), "");
}

TEST(CApiDataTypes, EveryTypeByNameAndBack) {
  const std::vector<std::pair<const char*, int>> types{{"f32", GEMMTUNE_F32},
                                                       {"f16", GEMMTUNE_F16},
                                                       {"bf16", GEMMTUNE_BF16},
                                                       {"e4m3", GEMMTUNE_E4M3},
                                                       {"e5m2", GEMMTUNE_E5M2}};
  for (const auto& [name, code] : types) {
    int got = -1;
    ASSERT_EQ(gemmtune_data_type_from_name(name, &got), GEMMTUNE_SUCCESS) << last_error();
    EXPECT_EQ(got, code) << name;
    ASSERT_NE(gemmtune_data_type_name(code), nullptr) << code;
    EXPECT_STREQ(gemmtune_data_type_name(code), name);
  }
  // The aliases gemm-tune's --dtype takes, in any case (torch's and numpy's dtype names too).
  for (const auto& [alias, code] :
       std::vector<std::pair<const char*, int>>{{"float32", GEMMTUNE_F32},
                                                {"FP16", GEMMTUNE_F16},
                                                {"bfloat16", GEMMTUNE_BF16},
                                                {"float8_e4m3fn", GEMMTUNE_E4M3},
                                                {"float8_e5m2", GEMMTUNE_E5M2}}) {
    int got = -1;
    ASSERT_EQ(gemmtune_data_type_from_name(alias, &got), GEMMTUNE_SUCCESS) << last_error();
    EXPECT_EQ(got, code) << alias;
  }
}

TEST(CApiDataTypes, UnknownNamesAndCodes) {
  int code = 42;
  expect_invalid(gemmtune_data_type_from_name("f64", &code), {"unknown data type 'f64'", "e5m2"});
  expect_invalid(gemmtune_data_type_from_name("", &code), {"unknown data type ''"});
  EXPECT_EQ(code, 42);  // left as it was
  expect_invalid(gemmtune_data_type_from_name(nullptr, &code), {"name is a null pointer"});
  expect_invalid(gemmtune_data_type_from_name("bf16", nullptr), {"code", "null pointer"});
  EXPECT_EQ(gemmtune_data_type_name(-1), nullptr);
  EXPECT_EQ(gemmtune_data_type_name(GEMMTUNE_TYPE_COUNT), nullptr);
  EXPECT_EQ(gemmtune_data_type_name(1000), nullptr);
}

// Fake device addresses: every call below fails before anything reads them.
void* const kA = reinterpret_cast<void*>(0x7f0000000000);
void* const kB = reinterpret_cast<void*>(0x7f0000100000);
void* const kC = reinterpret_cast<void*>(0x7f0000200000);

TEST(CApiMatmul, ChecksItsArgumentsBeforeItNeedsAGpu) {
  // On any machine: every failure here comes before a GPU is looked for.
  Desc d;
  const float one = 1.0f, zero = 0.0f, nan = std::nanf("");
  auto call = [&](gemmtune_matmul_desc desc, int64_t m, int64_t n, int64_t k, const float* alpha,
                  const void* a, int64_t lda, const void* b, int64_t ldb, const float* beta,
                  void* c, int64_t ldc) {
    return gemmtune_matmul(0, desc, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, nullptr);
  };
  expect_invalid(call(nullptr, 64, 64, 64, &one, kA, 64, kB, 64, &zero, kC, 64),
                 {"matmul descriptor is a null pointer"});
  expect_invalid(call(d, 64, 64, 64, nullptr, kA, 64, kB, 64, &zero, kC, 64),
                 {"alpha is a null pointer"});
  expect_invalid(call(d, 64, 64, 64, &one, kA, 64, kB, 64, nullptr, kC, 64),
                 {"beta is a null pointer"});
  expect_invalid(call(d, 64, 64, 64, &nan, kA, 64, kB, 64, &zero, kC, 64),
                 {"alpha must be finite"});
  expect_invalid(call(d, 64, 64, 64, &one, kA, 64, kB, 64, &nan, kC, 64), {"beta must be finite"});
  expect_invalid(call(d, 0, 64, 64, &one, kA, 64, kB, 64, &zero, kC, 64),
                 {"M must be at least 1 (got 0)"});
  expect_invalid(call(d, 64, 64, 64, &one, kA, 10, kB, 64, &zero, kC, 64), {"lda (10)"});
  expect_invalid(call(d, 64, 64, 64, &one, kA, 64, kB, 64, &zero, kC, 63), {"ldc (63)"});
  // op(B) = T: B is stored N x K, so ldb >= N.
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_OP_B, GEMMTUNE_OP_T), GEMMTUNE_SUCCESS);
  expect_invalid(call(d, 64, 100, 32, &one, kA, 64, kB, 32, &zero, kC, 64),
                 {"ldb (32)", "op(B)=t"});
  expect_invalid(call(d, 64, 64, 64, &one, nullptr, 64, kB, 64, &zero, kC, 64),
                 {"A is a null pointer"});
  expect_invalid(call(d, 64, 64, 64, &one, kA, 64, nullptr, 64, &zero, kC, 64),
                 {"B is a null pointer"});
  expect_invalid(call(d, 64, 64, 64, &one, kA, 64, kB, 64, &zero, nullptr, 64),
                 {"C is a null pointer"});
  // D is written over C: one type.
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_C_TYPE, GEMMTUNE_BF16), GEMMTUNE_SUCCESS);
  expect_invalid(call(d, 64, 64, 64, &one, kA, 64, kB, 64, &zero, kC, 64),
                 {"C is bf16 but D is f32"});
  // The same checks in select and record.
  const char* json = nullptr;
  expect_invalid(gemmtune_matmul_select(0, d, 64, 64, 64, kA, 64, kB, 64, 0.0f, kC, 64, &json),
                 {"C is bf16 but D is f32"});
  expect_invalid(
      gemmtune_matmul_select(0, nullptr, 64, 64, 64, kA, 64, kB, 64, 0.0f, kC, 64, &json),
      {"matmul descriptor is a null pointer"});
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_D_TYPE, GEMMTUNE_BF16), GEMMTUNE_SUCCESS);
  expect_invalid(gemmtune_matmul_select(0, d, 64, 64, 64, kA, 64, kB, 64, 0.0f, kC, 64, nullptr),
                 {"selection_json is a null pointer"});
  expect_invalid(gemmtune_matmul_select(0, d, 64, 64, 64, kA, 10, kB, 64, 0.0f, kC, 64, &json),
                 {"lda (10)"});
  EXPECT_EQ(json, nullptr);
}

// A float8 descriptor: e4m3 A, `b` B, bf16 C and D, op(A) = T, and `scaling`.
void set_float8(Desc& d, int32_t b, int32_t scaling) {
  for (auto [attr, value] : {std::pair{GEMMTUNE_MATMUL_DESC_A_TYPE, int32_t(GEMMTUNE_E4M3)},
                             {GEMMTUNE_MATMUL_DESC_B_TYPE, b},
                             {GEMMTUNE_MATMUL_DESC_C_TYPE, int32_t(GEMMTUNE_BF16)},
                             {GEMMTUNE_MATMUL_DESC_D_TYPE, int32_t(GEMMTUNE_BF16)},
                             {GEMMTUNE_MATMUL_DESC_SCALING, scaling},
                             {GEMMTUNE_MATMUL_DESC_OP_A, int32_t(GEMMTUNE_OP_T)}})
    ASSERT_EQ(d.set(attr, value), GEMMTUNE_SUCCESS) << last_error();
}

TEST(CApiMatmul, AScaledCallWithoutItsScalesIsRefusedBeforeItNeedsAGpu) {
  const float one = 1.0f, zero = 0.0f;
  Desc d;
  set_float8(d, GEMMTUNE_E4M3, GEMMTUNE_SCALING_BLOCK);
  // M = 300, K = 4096: A's scales are ceil(300/128) x 32, B's N x 32.
  expect_invalid(
      gemmtune_matmul(0, d, 300, 48, 4096, &one, kA, 4096, kB, 4096, &zero, kC, 300, nullptr),
      {"scaling block needs the scales of A", "GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER", "is not set",
       "3 x 32 fp32 scales"});
  ASSERT_EQ(set_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER, kScaleA), GEMMTUNE_SUCCESS);
  expect_invalid(
      gemmtune_matmul(0, d, 300, 48, 4096, &one, kA, 4096, kB, 4096, &zero, kC, 300, nullptr),
      {"scaling block needs the scales of B", "GEMMTUNE_MATMUL_DESC_SCALE_B_POINTER",
       "48 x 32 fp32 scales"});
  // Only B's given: A's is named.
  ASSERT_EQ(set_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER, nullptr), GEMMTUNE_SUCCESS);
  ASSERT_EQ(set_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_B_POINTER, kScaleB), GEMMTUNE_SUCCESS);
  expect_invalid(
      gemmtune_matmul(0, d, 300, 48, 4096, &one, kA, 4096, kB, 4096, &zero, kC, 300, nullptr),
      {"GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER is not set"});
  // Tensor scales are one of each.
  Desc tensor;
  set_float8(tensor, GEMMTUNE_E5M2, GEMMTUNE_SCALING_TENSOR);
  expect_invalid(
      gemmtune_matmul(0, tensor, 64, 48, 32, &one, kA, 32, kB, 32, &zero, kC, 64, nullptr),
      {"scaling tensor needs the scales of A", "1 x 1 fp32 scales"});
  // Float8 without a scaling, or a scaling of other types: validate()'s rules.
  Desc unscaled;
  set_float8(unscaled, GEMMTUNE_E4M3, GEMMTUNE_SCALING_NONE);
  expect_invalid(
      gemmtune_matmul(0, unscaled, 64, 48, 32, &one, kA, 32, kB, 32, &zero, kC, 64, nullptr),
      {"e4m3*e4m3->bf16 operands take scales"});
  Desc bf16_row;
  for (auto attr : {GEMMTUNE_MATMUL_DESC_A_TYPE, GEMMTUNE_MATMUL_DESC_B_TYPE,
                    GEMMTUNE_MATMUL_DESC_C_TYPE, GEMMTUNE_MATMUL_DESC_D_TYPE})
    ASSERT_EQ(bf16_row.set(attr, GEMMTUNE_BF16), GEMMTUNE_SUCCESS);
  ASSERT_EQ(bf16_row.set(GEMMTUNE_MATMUL_DESC_SCALING, GEMMTUNE_SCALING_ROW), GEMMTUNE_SUCCESS);
  expect_invalid(
      gemmtune_matmul(0, bf16_row, 64, 48, 32, &one, kA, 64, kB, 32, &zero, kC, 64, nullptr),
      {"scaling row is for float8 operands"});
  // The one-dtype functions cannot say scales: float8 goes through gemmtune_matmul.
  expect_invalid(gemmtune_gemm(GEMMTUNE_E4M3, GEMMTUNE_OP_T, GEMMTUNE_OP_N, 64, 48, 32, 1.0f, kA,
                               32, kB, 32, 0.0f, kC, 64, nullptr),
                 {"e4m3 operands take scales", "gemmtune_matmul"});
  gemmtune::test::TempDir dir;
  expect_invalid(gemmtune_record_problem((dir / "shapes.txt").c_str(), GEMMTUNE_E5M2, GEMMTUNE_OP_T,
                                         GEMMTUNE_OP_N, 64, 48, 32, 32, 32, 0.0f, 64, nullptr),
                 {"e5m2 operands take scales", "gemmtune_matmul"});
}

// Fast accumulation is the problem's (validate()): float8 with tensor or row scaling only, said
// before a GPU is needed, by the call, select and record alike.
TEST(CApiMatmul, FastAccumulationIsCheckedBeforeItNeedsAGpu) {
  const float one = 1.0f, zero = 0.0f;
  Desc block;
  set_float8(block, GEMMTUNE_E4M3, GEMMTUNE_SCALING_BLOCK);
  ASSERT_EQ(block.set(GEMMTUNE_MATMUL_DESC_ACCUMULATION, GEMMTUNE_ACCUMULATION_FAST),
            GEMMTUNE_SUCCESS);
  ASSERT_EQ(set_pointer(block, GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER, kScaleA), GEMMTUNE_SUCCESS);
  ASSERT_EQ(set_pointer(block, GEMMTUNE_MATMUL_DESC_SCALE_B_POINTER, kScaleB), GEMMTUNE_SUCCESS);
  const std::vector<std::string> block_message{
      "fast accumulation is for float8 with tensor or row scaling, not scaling block"};
  expect_invalid(
      gemmtune_matmul(0, block, 2112, 64, 7168, &one, kA, 7168, kB, 7168, &zero, kC, 2112, nullptr),
      block_message);
  const char* json = nullptr;
  expect_invalid(
      gemmtune_matmul_select(0, block, 2112, 64, 7168, kA, 7168, kB, 7168, 0.0f, kC, 2112, &json),
      block_message);
  EXPECT_EQ(json, nullptr);
  gemmtune::test::TempDir dir;
  const std::string path = (dir / "shapes.txt").string();
  expect_invalid(gemmtune_matmul_record_problem(path.c_str(), block, 2112, 64, 7168, 7168, 7168,
                                                0.0f, 2112, nullptr),
                 block_message);
  EXPECT_FALSE(std::filesystem::exists(path));
  // Not float8: bf16 has no scaling to go with it.
  Desc bf16;
  for (auto attr : {GEMMTUNE_MATMUL_DESC_A_TYPE, GEMMTUNE_MATMUL_DESC_B_TYPE,
                    GEMMTUNE_MATMUL_DESC_C_TYPE, GEMMTUNE_MATMUL_DESC_D_TYPE})
    ASSERT_EQ(bf16.set(attr, GEMMTUNE_BF16), GEMMTUNE_SUCCESS);
  ASSERT_EQ(bf16.set(GEMMTUNE_MATMUL_DESC_ACCUMULATION, GEMMTUNE_ACCUMULATION_FAST),
            GEMMTUNE_SUCCESS);
  expect_invalid(gemmtune_matmul(0, bf16, 64, 48, 32, &one, kA, 64, kB, 32, &zero, kC, 64, nullptr),
                 {"fast accumulation is for float8 with tensor or row scaling, not bf16"});
  // Precise again: the same block descriptor passes the checks (the scales are set).
  ASSERT_EQ(block.set(GEMMTUNE_MATMUL_DESC_ACCUMULATION, GEMMTUNE_ACCUMULATION_PRECISE),
            GEMMTUNE_SUCCESS);
  EXPECT_EQ(gemmtune_matmul_record_problem(path.c_str(), block, 2112, 64, 7168, 7168, 7168, 0.0f,
                                           2112, nullptr),
            GEMMTUNE_SUCCESS)
      << last_error();
}

// A descriptor of every operand of `type`.
void set_uniform(Desc& d, int32_t type) {
  for (auto attr : {GEMMTUNE_MATMUL_DESC_A_TYPE, GEMMTUNE_MATMUL_DESC_B_TYPE,
                    GEMMTUNE_MATMUL_DESC_C_TYPE, GEMMTUNE_MATMUL_DESC_D_TYPE})
    ASSERT_EQ(d.set(attr, type), GEMMTUNE_SUCCESS);
}

// A precision other than exact is f32's (validate()): said of other types before a GPU is
// needed, by the call, select and record alike.
TEST(CApiMatmul, APrecisionOfOtherTypesThanF32IsCheckedBeforeItNeedsAGpu) {
  const float one = 1.0f, zero = 0.0f;
  Desc bf16;
  set_uniform(bf16, GEMMTUNE_BF16);
  ASSERT_EQ(bf16.set(GEMMTUNE_MATMUL_DESC_PRECISION, GEMMTUNE_PRECISION_TF32), GEMMTUNE_SUCCESS);
  const std::vector<std::string> message{
      "precision tf32 is for f32 operands, accumulator and output, not bf16"};
  expect_invalid(gemmtune_matmul(0, bf16, 64, 48, 32, &one, kA, 64, kB, 32, &zero, kC, 64, nullptr),
                 message);
  const char* json = nullptr;
  expect_invalid(gemmtune_matmul_select(0, bf16, 64, 48, 32, kA, 64, kB, 32, 0.0f, kC, 64, &json),
                 message);
  EXPECT_EQ(json, nullptr);
  gemmtune::test::TempDir dir;
  const std::string path = (dir / "shapes.txt").string();
  expect_invalid(
      gemmtune_matmul_record_problem(path.c_str(), bf16, 64, 48, 32, 64, 32, 0.0f, 64, nullptr),
      message);
  EXPECT_FALSE(std::filesystem::exists(path));
  // Exact is every type's.
  ASSERT_EQ(bf16.set(GEMMTUNE_MATMUL_DESC_PRECISION, GEMMTUNE_PRECISION_EXACT), GEMMTUNE_SUCCESS);
  EXPECT_EQ(
      gemmtune_matmul_record_problem(path.c_str(), bf16, 64, 48, 32, 64, 32, 0.0f, 64, nullptr),
      GEMMTUNE_SUCCESS)
      << last_error();
}

// A bf16 descriptor with op(A) = T (nn.Linear's y^T = W x^T) and the epilogue `bias`, `act`.
void set_epilogue(Desc& d, int32_t bias, int32_t act) {
  for (auto attr : {GEMMTUNE_MATMUL_DESC_A_TYPE, GEMMTUNE_MATMUL_DESC_B_TYPE,
                    GEMMTUNE_MATMUL_DESC_C_TYPE, GEMMTUNE_MATMUL_DESC_D_TYPE})
    ASSERT_EQ(d.set(attr, GEMMTUNE_BF16), GEMMTUNE_SUCCESS);
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_OP_A, GEMMTUNE_OP_T), GEMMTUNE_SUCCESS);
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_BIAS, bias), GEMMTUNE_SUCCESS);
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_ACTIVATION, act), GEMMTUNE_SUCCESS);
}

// A call with a bias needs its vector, named with its length and type, before a GPU is needed;
// select and record need none (only the problem).
TEST(CApiMatmul, ABiasWithoutItsPointerIsRefusedBeforeItNeedsAGpu) {
  const float one = 1.0f, zero = 0.0f;
  struct Case {
    int32_t bias;
    const char* name;
    const char* length;
  };
  for (const Case& c :
       {Case{GEMMTUNE_BIAS_M, "bias,gelu", "768"}, {GEMMTUNE_BIAS_N, "bias_n,gelu", "40"}}) {
    Desc d;
    set_epilogue(d, c.bias, GEMMTUNE_ACTIVATION_GELU);
    const std::vector<std::string> message{
        std::string("epilogue ") + c.name + " needs its bias",
        "GEMMTUNE_MATMUL_DESC_BIAS_POINTER is not set",
        std::string("a device pointer to ") + c.length + " values of D's type, bf16"};
    expect_invalid(
        gemmtune_matmul(0, d, 768, 40, 1024, &one, kA, 1024, kB, 1024, &zero, kC, 768, nullptr),
        message);
    if (gemmtune::cu::available()) continue;  // the call below would run on fake addresses
    ASSERT_EQ(set_address(d, GEMMTUNE_MATMUL_DESC_BIAS_POINTER, kBias), GEMMTUNE_SUCCESS);
    EXPECT_EQ(
        gemmtune_matmul(0, d, 768, 40, 1024, &one, kA, 1024, kB, 1024, &zero, kC, 768, nullptr),
        GEMMTUNE_ERROR_NO_DEVICE)
        << last_error();
  }
  // Epilogues are not for grouped problems yet: validate() says so, in the call and in select.
  Desc moe;
  set_epilogue(moe, GEMMTUNE_BIAS_NONE, GEMMTUNE_ACTIVATION_RELU);
  ASSERT_EQ(moe.set(GEMMTUNE_MATMUL_DESC_GROUPS, 8), GEMMTUNE_SUCCESS);
  ASSERT_EQ(set_ends(moe, kEnds), GEMMTUNE_SUCCESS);
  const std::vector<std::string> grouped{"grouped problems with an epilogue are not supported"};
  expect_invalid(
      gemmtune_matmul(0, moe, 768, 64, 1024, &one, kA, 1024, kB, 1024, &zero, kC, 768, nullptr),
      grouped);
  const char* json = nullptr;
  expect_invalid(
      gemmtune_matmul_select(0, moe, 768, 64, 1024, kA, 1024, kB, 1024, 0.0f, kC, 768, &json),
      grouped);
  EXPECT_EQ(json, nullptr);
}

// The pre-activation output: an int32_t 0 or 1 and a pointer apart from the others; a call with
// it needs its buffer (named with its shape and type), an activation, and no gate.
TEST(CApiMatmul, APreActivationOutputIsCheckedBeforeItNeedsAGpu) {
  const float one = 1.0f, zero = 0.0f;
  void* const aux = reinterpret_cast<void*>(0x7f0000700000);
  Desc d;
  set_epilogue(d, GEMMTUNE_BIAS_M, GEMMTUNE_ACTIVATION_GELU);
  ASSERT_EQ(set_address(d, GEMMTUNE_MATMUL_DESC_BIAS_POINTER, kBias), GEMMTUNE_SUCCESS);
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_AUX), 0);
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_AUX, 1), GEMMTUNE_SUCCESS) << last_error();
  EXPECT_EQ(d.get(GEMMTUNE_MATMUL_DESC_AUX), 1);
  EXPECT_EQ(get_address(d, GEMMTUNE_MATMUL_DESC_AUX_POINTER), nullptr);
  expect_invalid(
      gemmtune_matmul(0, d, 768, 40, 1024, &one, kA, 1024, kB, 1024, &zero, kC, 768, nullptr),
      {"epilogue bias,gelu,aux stores its pre-activation",
       "GEMMTUNE_MATMUL_DESC_AUX_POINTER is not set", "768 x 40 values of D's type, bf16"});
  ASSERT_EQ(set_address(d, GEMMTUNE_MATMUL_DESC_AUX_POINTER, aux), GEMMTUNE_SUCCESS);
  EXPECT_EQ(get_address(d, GEMMTUNE_MATMUL_DESC_AUX_POINTER), aux);
  EXPECT_EQ(get_address(d, GEMMTUNE_MATMUL_DESC_BIAS_POINTER), kBias);
  // Without an activation, or gated, there is no pre-activation to keep.
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_ACTIVATION, GEMMTUNE_ACTIVATION_IDENTITY), GEMMTUNE_SUCCESS);
  expect_invalid(
      gemmtune_matmul(0, d, 768, 40, 1024, &one, kA, 1024, kB, 1024, &zero, kC, 768, nullptr),
      {"aux (the pre-activation as a second output) is for an activation that is not gated"});
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_ACTIVATION, GEMMTUNE_ACTIVATION_SILU), GEMMTUNE_SUCCESS);
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_GATE, GEMMTUNE_GATE_HALVES), GEMMTUNE_SUCCESS);
  expect_invalid(
      gemmtune_matmul(0, d, 768, 40, 1024, &one, kA, 1024, kB, 1024, &zero, kC, 384, nullptr),
      {"aux (the pre-activation as a second output) is for an activation that is not gated"});
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_GATE, GEMMTUNE_GATE_NONE), GEMMTUNE_SUCCESS);
  if (gemmtune::cu::available()) return;  // the call below would run on fake addresses
  EXPECT_EQ(gemmtune_matmul(0, d, 768, 40, 1024, &one, kA, 1024, kB, 1024, &zero, kC, 768, nullptr),
            GEMMTUNE_ERROR_NO_DEVICE)
      << last_error();
}

// With D's own buffer, beta == 0 never reads C, which may then be NULL; beta != 0 needs it.
TEST(CApiMatmul, WithItsOwnDBufferCIsNeededOnlyWhenRead) {
  const float one = 1.0f, zero = 0.0f;
  Desc d;
  set_epilogue(d, GEMMTUNE_BIAS_NONE, GEMMTUNE_ACTIVATION_IDENTITY);
  expect_invalid(
      gemmtune_matmul(0, d, 64, 48, 32, &one, kA, 32, kB, 32, &zero, nullptr, 64, nullptr),
      {"C is a null pointer", "GEMMTUNE_MATMUL_DESC_D_POINTER"});
  ASSERT_EQ(set_address(d, GEMMTUNE_MATMUL_DESC_D_POINTER, kD), GEMMTUNE_SUCCESS);
  expect_invalid(
      gemmtune_matmul(0, d, 64, 48, 32, &one, kA, 32, kB, 32, &one, nullptr, 64, nullptr),
      {"C is a null pointer, and beta != 0 reads it"});
  if (gemmtune::cu::available()) return;  // the call below would run on fake addresses
  EXPECT_EQ(gemmtune_matmul(0, d, 64, 48, 32, &one, kA, 32, kB, 32, &zero, nullptr, 64, nullptr),
            GEMMTUNE_ERROR_NO_DEVICE)
      << last_error();
}

std::vector<std::string> problem_lines(const std::filesystem::path& path);

// A gated call (SwiGLU's gate_up_proj: m = 2 * 384 rows of op(A), D of 384 rows) is checked
// before a GPU is needed: an even m, beta 0, ldc of D's rows, an activation, the bias's M values;
// select and record see the same problem (its line: epilogue=, ldc tight at m / 2).
TEST(CApiMatmul, AGatedCallIsCheckedBeforeItNeedsAGpu) {
  const float one = 1.0f, zero = 0.0f;
  Desc d;
  set_epilogue(d, GEMMTUNE_BIAS_NONE, GEMMTUNE_ACTIVATION_SILU);
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_GATE, GEMMTUNE_GATE_HALVES), GEMMTUNE_SUCCESS);
  expect_invalid(
      gemmtune_matmul(0, d, 767, 40, 1024, &one, kA, 1024, kB, 1024, &zero, kC, 384, nullptr),
      {"gated epilogue takes an even M", "M = 767"});
  expect_invalid(
      gemmtune_matmul(0, d, 768, 40, 1024, &one, kA, 1024, kB, 1024, &one, kC, 384, nullptr),
      {"reads no C (beta = 0)", "beta != 0"});
  expect_invalid(
      gemmtune_matmul(0, d, 768, 40, 1024, &one, kA, 1024, kB, 1024, &zero, kC, 383, nullptr),
      {"ldc (383) must be at least D's rows (384"});
  const char* json = nullptr;
  expect_invalid(
      gemmtune_matmul_select(0, d, 767, 40, 1024, kA, 1024, kB, 1024, 0.0f, kC, 384, &json),
      {"even M"});
  EXPECT_EQ(json, nullptr);
  // A bias along M has op(A)'s m values (gate and up rows).
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_BIAS, GEMMTUNE_BIAS_M), GEMMTUNE_SUCCESS);
  expect_invalid(
      gemmtune_matmul(0, d, 768, 40, 1024, &one, kA, 1024, kB, 1024, &zero, kC, 384, nullptr),
      {"epilogue bias,swiglu needs its bias", "a device pointer to 768 values"});
  // Gated without an activation has no name: refused.
  Desc bare;
  set_epilogue(bare, GEMMTUNE_BIAS_NONE, GEMMTUNE_ACTIVATION_IDENTITY);
  ASSERT_EQ(bare.set(GEMMTUNE_MATMUL_DESC_GATE, GEMMTUNE_GATE_INTERLEAVED), GEMMTUNE_SUCCESS);
  expect_invalid(
      gemmtune_matmul(0, bare, 768, 40, 1024, &one, kA, 1024, kB, 1024, &zero, kC, 384, nullptr),
      {"GEMMTUNE_MATMUL_DESC_GATE is set but GEMMTUNE_MATMUL_DESC_ACTIVATION is identity"});
  gemmtune::test::TempDir dir;
  const std::string path = (dir / "shapes.txt").string();
  Desc inter;
  set_epilogue(inter, GEMMTUNE_BIAS_NONE, GEMMTUNE_ACTIVATION_GELU);
  ASSERT_EQ(inter.set(GEMMTUNE_MATMUL_DESC_GATE, GEMMTUNE_GATE_INTERLEAVED), GEMMTUNE_SUCCESS);
  for (int64_t ldc : {384, 400})
    ASSERT_EQ(gemmtune_matmul_record_problem(path.c_str(), inter, 768, 40, 1024, 1024, 1024, 0.0f,
                                             ldc, nullptr),
              GEMMTUNE_SUCCESS)
        << last_error();
  EXPECT_EQ(problem_lines(path),
            (std::vector<std::string>{"768 40 1024 bf16 tn epilogue=geglu,interleaved",
                                      "768 40 1024 bf16 tn epilogue=geglu,interleaved ldc=400"}));
  if (gemmtune::cu::available()) return;  // the call below would run on fake addresses
  ASSERT_EQ(set_address(d, GEMMTUNE_MATMUL_DESC_BIAS_POINTER, kBias), GEMMTUNE_SUCCESS);
  EXPECT_EQ(gemmtune_matmul(0, d, 768, 40, 1024, &one, kA, 1024, kB, 1024, &zero, kC, 384, nullptr),
            GEMMTUNE_ERROR_NO_DEVICE)
      << last_error();
}

// A grouped descriptor: bf16 everywhere, op(A) = T, `groups` groups.
void set_grouped(Desc& d, int32_t groups) {
  for (auto attr : {GEMMTUNE_MATMUL_DESC_A_TYPE, GEMMTUNE_MATMUL_DESC_B_TYPE,
                    GEMMTUNE_MATMUL_DESC_C_TYPE, GEMMTUNE_MATMUL_DESC_D_TYPE})
    ASSERT_EQ(d.set(attr, GEMMTUNE_BF16), GEMMTUNE_SUCCESS);
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_OP_A, GEMMTUNE_OP_T), GEMMTUNE_SUCCESS);
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_GROUPS, groups), GEMMTUNE_SUCCESS);
}

TEST(CApiMatmul, AGroupedCallWithoutItsGroupEndsIsRefusedBeforeItNeedsAGpu) {
  const float one = 1.0f, zero = 0.0f;
  Desc d;
  set_grouped(d, 128);
  expect_invalid(
      gemmtune_matmul(0, d, 1536, 32768, 2048, &one, kA, 2048, kB, 2048, &zero, kC, 1536, nullptr),
      {"128 groups need their column end offsets",
       "GEMMTUNE_MATMUL_DESC_GROUP_ENDS_POINTER is not set",
       "a device pointer to 128 int32 offsets"});
  // Grouped float8: the scales of A are the groups' one after another (32 x 56 blocks each).
  Desc scaled;
  set_float8(scaled, GEMMTUNE_E4M3, GEMMTUNE_SCALING_BLOCK);
  ASSERT_EQ(scaled.set(GEMMTUNE_MATMUL_DESC_GROUPS, 32), GEMMTUNE_SUCCESS);
  ASSERT_EQ(set_ends(scaled, kEnds), GEMMTUNE_SUCCESS);
  expect_invalid(gemmtune_matmul(0, scaled, 4096, 512, 7168, &one, kA, 7168, kB, 7168, &zero, kC,
                                 4096, nullptr),
                 {"scaling block needs the scales of A",
                  "a device pointer to 32 x 1792 fp32 "
                  "scales: the 32 groups' 32 x 56 one after another)"});
}

// A masked descriptor: `groups` groups of counts.
void set_masked(Desc& d, int32_t groups) {
  set_grouped(d, groups);
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_GROUP_LAYOUT, GEMMTUNE_GROUP_LAYOUT_MASKED),
            GEMMTUNE_SUCCESS);
}

TEST(CApiMatmul, AMaskedCallIsCheckedBeforeItNeedsAGpu) {
  const float one = 1.0f, zero = 0.0f;
  Desc d;
  set_masked(d, 32);
  // Without its counts: the message says counts, not offsets.
  expect_invalid(
      gemmtune_matmul(0, d, 7168, 32 * 64, 2048, &one, kA, 2048, kB, 2048, &zero, kC, 7168,
                      nullptr),
      {"32 masked groups need their counts", "GEMMTUNE_MATMUL_DESC_GROUP_ENDS_POINTER is not set",
       "a device pointer to 32 int32 counts"});
  // n must be G capacities (the problem's rule, before the counts are asked for).
  ASSERT_EQ(set_ends(d, kEnds), GEMMTUNE_SUCCESS);
  expect_invalid(
      gemmtune_matmul(0, d, 7168, 2000, 2048, &one, kA, 2048, kB, 2048, &zero, kC, 7168, nullptr),
      {"masked: N (2000) must be the 32 groups' capacity times G"});
  // Masked needs groups.
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_GROUPS, 0), GEMMTUNE_SUCCESS);
  expect_invalid(
      gemmtune_matmul(0, d, 7168, 2048, 2048, &one, kA, 2048, kB, 2048, &zero, kC, 7168, nullptr),
      {"a masked group layout needs groups"});
  const char* json = nullptr;
  expect_invalid(
      gemmtune_matmul_select(0, d, 7168, 2048, 2048, kA, 2048, kB, 2048, 0.0f, kC, 7168, &json),
      {"a masked group layout needs groups"});
  EXPECT_EQ(json, nullptr);
}

TEST(CApiMatmul, WithoutAGpuTheCallSaysSo) {
  if (gemmtune::cu::available())
    GTEST_SKIP() << "a GPU is here: this test passes fake addresses, which the library would run "
                    "kernels on";
  Desc d;
  set_float8(d, GEMMTUNE_E5M2, GEMMTUNE_SCALING_ROW);
  ASSERT_EQ(set_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER, kScaleA), GEMMTUNE_SUCCESS);
  ASSERT_EQ(set_pointer(d, GEMMTUNE_MATMUL_DESC_SCALE_B_POINTER, kScaleB), GEMMTUNE_SUCCESS);
  const float one = 1.0f, zero = 0.0f;
  for (int device : {-1, 0}) {
    EXPECT_EQ(gemmtune_matmul(device, d, 64, 48, 32, &one, kA, 32, kB, 32, &zero, kC, 64, nullptr),
              GEMMTUNE_ERROR_NO_DEVICE)
        << last_error();
    EXPECT_EQ(last_error().rfind("no GPU: ", 0), 0u) << last_error();
    const char* json = nullptr;
    EXPECT_EQ(gemmtune_matmul_select(device, d, 64, 48, 32, kA, 32, kB, 32, 0.0f, kC, 64, &json),
              GEMMTUNE_ERROR_NO_DEVICE)
        << last_error();
    EXPECT_EQ(last_error().rfind("no GPU: ", 0), 0u) << last_error();
    EXPECT_EQ(json, nullptr);
  }
  // A grouped call with its group ends gets as far as the GPU too.
  Desc moe;
  set_grouped(moe, 128);
  ASSERT_EQ(set_ends(moe, kEnds), GEMMTUNE_SUCCESS);
  EXPECT_EQ(gemmtune_matmul(0, moe, 1536, 32768, 2048, &one, kA, 2048, kB, 2048, &zero, kC, 1536,
                            nullptr),
            GEMMTUNE_ERROR_NO_DEVICE)
      << last_error();
  // A fast float8 call with its scales.
  ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_ACCUMULATION, GEMMTUNE_ACCUMULATION_FAST), GEMMTUNE_SUCCESS);
  EXPECT_EQ(gemmtune_matmul(0, d, 64, 48, 32, &one, kA, 32, kB, 32, &zero, kC, 64, nullptr),
            GEMMTUNE_ERROR_NO_DEVICE)
      << last_error();
  // An epilogue call with its bias, and D of its own.
  Desc linear;
  set_epilogue(linear, GEMMTUNE_BIAS_M, GEMMTUNE_ACTIVATION_SILU);
  ASSERT_EQ(set_address(linear, GEMMTUNE_MATMUL_DESC_BIAS_POINTER, kBias), GEMMTUNE_SUCCESS);
  ASSERT_EQ(set_address(linear, GEMMTUNE_MATMUL_DESC_D_POINTER, kD), GEMMTUNE_SUCCESS);
  EXPECT_EQ(gemmtune_matmul(0, linear, 64, 48, 32, &one, kA, 32, kB, 32, &one, kC, 64, nullptr),
            GEMMTUNE_ERROR_NO_DEVICE)
      << last_error();
  // And a masked one with its counts.
  Desc decode;
  set_masked(decode, 32);
  ASSERT_EQ(set_ends(decode, kEnds), GEMMTUNE_SUCCESS);
  EXPECT_EQ(gemmtune_matmul(0, decode, 7168, 32 * 64, 2048, &one, kA, 2048, kB, 2048, &zero, kC,
                            7168, nullptr),
            GEMMTUNE_ERROR_NO_DEVICE)
      << last_error();
  // gemmtune_gemm takes every type but float8 (which needs scales): the library says what it
  // cannot run.
  EXPECT_EQ(gemmtune_gemm(GEMMTUNE_F16, GEMMTUNE_OP_T, GEMMTUNE_OP_N, 64, 48, 32, 1.0f, kA, 32, kB,
                          32, 0.0f, kC, 64, nullptr),
            GEMMTUNE_ERROR_NO_DEVICE)
      << last_error();
  expect_invalid(
      gemmtune_gemm(static_cast<gemmtune_dtype>(GEMMTUNE_TYPE_COUNT), GEMMTUNE_OP_N, GEMMTUNE_OP_N,
                    64, 48, 32, 1.0f, kA, 64, kB, 32, 0.0f, kC, 64, nullptr),
      {"unknown dtype 5"});
}

std::vector<std::string> problem_lines(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') out.push_back(line);
  return out;
}

TEST(CApiMatmul, RecordsTheProblemOfADescriptor) {
  gemmtune::test::TempDir dir;
  const std::string path = (dir / "shapes.txt").string();
  Desc mixed;  // no scale pointers: recording needs none
  set_float8(mixed, GEMMTUNE_E5M2, GEMMTUNE_SCALING_ROW);
  int appended = -1;
  ASSERT_EQ(
      gemmtune_matmul_record_problem(path.c_str(), mixed, 64, 48, 32, 32, 32, 0.0f, 64, &appended),
      GEMMTUNE_SUCCESS)
      << last_error();
  EXPECT_EQ(appended, 1);
  ASSERT_EQ(
      gemmtune_matmul_record_problem(path.c_str(), mixed, 64, 48, 32, 32, 32, 0.0f, 64, &appended),
      GEMMTUNE_SUCCESS);
  EXPECT_EQ(appended, 0);  // listed already
  // A uniform descriptor writes what gemmtune_record_problem writes for its dtype.
  Desc bf16;
  for (auto attr : {GEMMTUNE_MATMUL_DESC_A_TYPE, GEMMTUNE_MATMUL_DESC_B_TYPE,
                    GEMMTUNE_MATMUL_DESC_C_TYPE, GEMMTUNE_MATMUL_DESC_D_TYPE})
    ASSERT_EQ(bf16.set(attr, GEMMTUNE_BF16), GEMMTUNE_SUCCESS);
  ASSERT_EQ(bf16.set(GEMMTUNE_MATMUL_DESC_OP_A, GEMMTUNE_OP_T), GEMMTUNE_SUCCESS);
  ASSERT_EQ(
      gemmtune_matmul_record_problem(path.c_str(), bf16, 64, 48, 32, 32, 32, 1.0f, 64, nullptr),
      GEMMTUNE_SUCCESS)
      << last_error();
  ASSERT_EQ(gemmtune_record_problem(path.c_str(), GEMMTUNE_BF16, GEMMTUNE_OP_T, GEMMTUNE_OP_N, 64,
                                    48, 32, 32, 32, 1.0f, 64, &appended),
            GEMMTUNE_SUCCESS);
  EXPECT_EQ(appended, 0);
  EXPECT_EQ(problem_lines(path),
            (std::vector<std::string>{"64 48 32 e4m3*e5m2->bf16 tn scaling=row",
                                      "64 48 32 bf16 tn beta=1"}));
  expect_invalid(
      gemmtune_matmul_record_problem(path.c_str(), nullptr, 64, 48, 32, 32, 32, 0.0f, 64, nullptr),
      {"matmul descriptor is a null pointer"});
  expect_invalid(gemmtune_matmul_record_problem("", mixed, 64, 48, 32, 32, 32, 0.0f, 64, nullptr),
                 {"path is empty"});
  expect_invalid(
      gemmtune_matmul_record_problem(path.c_str(), mixed, 64, 48, 32, 16, 32, 0.0f, 64, nullptr),
      {"lda (16)"});
}

// The call's problem carries the accumulation: tensor and row scaling take fast, and the
// recorded line says so (GEMMTUNE_RECORD's), apart from the precise problem of the same sizes.
TEST(CApiMatmul, AFastProblemIsRecordedWithItsAccumulation) {
  gemmtune::test::TempDir dir;
  const std::string path = (dir / "shapes.txt").string();
  for (int32_t scaling : {GEMMTUNE_SCALING_TENSOR, GEMMTUNE_SCALING_ROW}) {
    for (int32_t accumulation : {GEMMTUNE_ACCUMULATION_FAST, GEMMTUNE_ACCUMULATION_PRECISE}) {
      Desc d;
      set_float8(d, GEMMTUNE_E4M3, scaling);
      ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_ACCUMULATION, accumulation), GEMMTUNE_SUCCESS);
      int appended = -1;
      ASSERT_EQ(gemmtune_matmul_record_problem(path.c_str(), d, 2112, 64, 7168, 7168, 7168, 0.0f,
                                               2112, &appended),
                GEMMTUNE_SUCCESS)
          << last_error();
      EXPECT_EQ(appended, 1) << "a line of its own";
    }
  }
  EXPECT_EQ(problem_lines(path), (std::vector<std::string>{
                                     "2112 64 7168 e4m3*e4m3->bf16 tn scaling=tensor accum=fast",
                                     "2112 64 7168 e4m3*e4m3->bf16 tn scaling=tensor",
                                     "2112 64 7168 e4m3*e4m3->bf16 tn scaling=row accum=fast",
                                     "2112 64 7168 e4m3*e4m3->bf16 tn scaling=row",
                                 }));
}

// An environment variable set for the length of a test, then unset.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  void set(const char* value) const { ::setenv(name_, value, 1); }

 private:
  const char* name_;
};

// The call's problem carries the precision: an f32 one computed on tensor cores is recorded
// with it (GEMMTUNE_RECORD's line), apart from the exact problem of the same sizes.
TEST(CApiMatmul, AnF32ProblemIsRecordedWithItsPrecision) {
  gemmtune::test::TempDir dir;
  const std::string path = (dir / "shapes.txt").string();
  for (int32_t precision :
       {GEMMTUNE_PRECISION_TF32, GEMMTUNE_PRECISION_TF32X3, GEMMTUNE_PRECISION_EXACT}) {
    Desc d;
    ASSERT_EQ(d.set(GEMMTUNE_MATMUL_DESC_PRECISION, precision), GEMMTUNE_SUCCESS);
    int appended = -1;
    ASSERT_EQ(
        gemmtune_matmul_record_problem(path.c_str(), d, 64, 48, 32, 64, 32, 0.0f, 64, &appended),
        GEMMTUNE_SUCCESS)
        << last_error();
    EXPECT_EQ(appended, 1) << "a line of its own";
  }
  EXPECT_EQ(problem_lines(path),
            (std::vector<std::string>{"64 48 32 f32 nn precision=tf32",
                                      "64 48 32 f32 nn precision=3xtf32", "64 48 32 f32 nn"}));
}

// GEMMTUNE_F32_PRECISION (else Options::f32_precision, which comes first) is the precision of f32
// calls whose descriptor sets none: one that sets it, and other types, are not its. A bad value is
// refused naming the variable.
TEST(CApiMatmul, GemmtuneF32PrecisionIsTheDefaultOfF32CallsThatSetNone) {
  const ScopedEnv env("GEMMTUNE_F32_PRECISION", "tf32");
  gemmtune::test::TempDir dir;
  const std::string path = (dir / "shapes.txt").string();
  Desc f32, exact, bf16;
  ASSERT_EQ(exact.set(GEMMTUNE_MATMUL_DESC_PRECISION, GEMMTUNE_PRECISION_EXACT), GEMMTUNE_SUCCESS);
  set_uniform(bf16, GEMMTUNE_BF16);
  for (const Desc* d : {&f32, &exact, &bf16})
    ASSERT_EQ(
        gemmtune_matmul_record_problem(path.c_str(), *d, 64, 48, 32, 64, 32, 0.0f, 64, nullptr),
        GEMMTUNE_SUCCESS)
        << last_error();
  int appended = -1;
  ASSERT_EQ(gemmtune_record_problem(path.c_str(), GEMMTUNE_F32, GEMMTUNE_OP_N, GEMMTUNE_OP_N, 64,
                                    48, 32, 64, 32, 0.0f, 64, &appended),
            GEMMTUNE_SUCCESS);
  EXPECT_EQ(appended, 0) << "the one-type call is the default's too";
  EXPECT_EQ(problem_lines(path), (std::vector<std::string>{"64 48 32 f32 nn precision=tf32",
                                                           "64 48 32 f32 nn", "64 48 32 bf16 nn"}));
  EXPECT_EQ(gemmtune::Library().f32_precision(), gemmtune::Precision::tf32);
  EXPECT_EQ(gemmtune::Library({.f32_precision = "3xTF32"}).f32_precision(),
            gemmtune::Precision::tf32x3);

  env.set("high");
  expect_invalid(
      gemmtune_matmul_record_problem(path.c_str(), f32, 64, 48, 32, 64, 32, 0.0f, 64, nullptr),
      {"GEMMTUNE_F32_PRECISION=high: expected exact, tf32 or 3xtf32"});
  for (const auto& [options, says] :
       {std::pair{gemmtune::Options{}, "GEMMTUNE_F32_PRECISION=high"},
        std::pair{gemmtune::Options{.f32_precision = "fp16"}, "Options::f32_precision=fp16"}}) {
    try {
      gemmtune::Library library(options);
      ADD_FAILURE() << "made a library with " << says;
    } catch (const gemmtune::Error& e) {
      EXPECT_EQ(e.code(), gemmtune::Errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
}

// What gemmtune_matmul_record_problem (and so GEMMTUNE_RECORD) writes of a float8 problem,
// gemm-tune --shapes reads back as the same problem: types, scaling, ops, sizes, ld, beta.
TEST(CApiMatmul, AFloat8RecordReadsBackAsTheSameProblem) {
  gemmtune::test::TempDir dir;
  const std::string path = (dir / "shapes.txt").string();
  struct Case {
    int32_t b, scaling;
    int64_t m, n, k, lda, ldb, ldc;
    float beta;
    std::string line;
  };
  const std::vector<Case> cases = {
      {GEMMTUNE_E4M3, GEMMTUNE_SCALING_BLOCK, 2112, 64, 7168, 7168, 7168, 2112, 0.0f,
       "2112 64 7168 e4m3*e4m3->bf16 tn scaling=block"},
      {GEMMTUNE_E4M3, GEMMTUNE_SCALING_TENSOR, 2112, 64, 7168, 7168, 7168, 2112, 0.0f,
       "2112 64 7168 e4m3*e4m3->bf16 tn scaling=tensor"},
      {GEMMTUNE_E5M2, GEMMTUNE_SCALING_ROW, 300, 40, 256, 272, 256, 304, 1.0f,
       "300 40 256 e4m3*e5m2->bf16 tn scaling=row lda=272 ldc=304 beta=1"},
  };
  for (const Case& c : cases) {
    Desc d;
    set_float8(d, c.b, c.scaling);
    ASSERT_EQ(gemmtune_matmul_record_problem(path.c_str(), d, c.m, c.n, c.k, c.lda, c.ldb, c.beta,
                                             c.ldc, nullptr),
              GEMMTUNE_SUCCESS)
        << last_error();
  }
  std::vector<std::string> expected;
  for (const Case& c : cases) expected.push_back(c.line);
  EXPECT_EQ(problem_lines(path), expected);
  const auto lines = gemmtune::cli::read_shapes_file(path);
  ASSERT_EQ(lines.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const gemmtune::Problem p = gemmtune::cli::problem_of_line(lines[i], "f32", "nn", 0.0f);
    gemmtune::Problem want = gemmtune::make_problem(
        gemmtune::DataTypes{gemmtune::DataType::e4m3, static_cast<gemmtune::DataType>(c.b),
                            gemmtune::DataType::bf16, gemmtune::DataType::bf16},
        gemmtune::Op::T, gemmtune::Op::N, c.m, c.n, c.k);
    want.scaling = static_cast<gemmtune::Scaling>(c.scaling);
    want.lda = c.lda, want.ldb = c.ldb, want.ldc = c.ldc;
    want.align =
        gemmtune::alignment_class(want.types, nullptr, nullptr, nullptr, c.lda, c.ldb, c.ldc);
    want.reads_c = c.beta != 0.0f;
    EXPECT_EQ(p.describe(), want.describe()) << c.line;
    EXPECT_TRUE(p == want) << c.line;
  }
}

// A grouped problem's line gives N as the mean columns of a group, as gemm-tune --groups takes it,
// and reads back as the same problem. Recording needs no group ends.
TEST(CApiMatmul, AGroupedRecordReadsBackAsTheSameProblem) {
  gemmtune::test::TempDir dir;
  const std::string path = (dir / "shapes.txt").string();
  Desc d;
  set_grouped(d, 128);
  ASSERT_EQ(gemmtune_matmul_record_problem(path.c_str(), d, 1536, 32768, 2048, 2048, 2048, 0.0f,
                                           1536, nullptr),
            GEMMTUNE_SUCCESS)
      << last_error();
  EXPECT_EQ(problem_lines(path), (std::vector<std::string>{"1536 256 2048 bf16 tn groups=128"}));
  const auto lines = gemmtune::cli::read_shapes_file(path);
  ASSERT_EQ(lines.size(), 1u);
  gemmtune::Problem want = gemmtune::make_problem(gemmtune::DType::bf16, gemmtune::Op::T,
                                                  gemmtune::Op::N, 1536, 32768, 2048);
  want.groups = 128;
  EXPECT_TRUE(gemmtune::cli::problem_of_line(lines[0], "f32", "nn", 0.0f) == want);
}

TEST(CApiHeader, CompilesAsCAndCxx17) {
  const std::string include = std::string("-I") + GEMMTUNE_SOURCE_DIR + "/runtime/include -I" +
                              GEMMTUNE_SOURCE_DIR + "/templates";
  if (gemmtune::test::run_command("command -v cc").exit_code != 0)
    GTEST_SKIP() << "no C compiler (cc) on the PATH";
  gemmtune::test::TempDir dir;
  const auto source = dir / "use.c";
  std::ofstream(source)
      << "#include <gemmtune/gemmtune.h>\n"
         "int use(void) {\n"
         "  gemmtune_matmul_desc desc = 0;\n"
         "  int32_t e4m3 = GEMMTUNE_E4M3;\n"
         "  float one = 1.0f, zero = 0.0f;\n"
         "  if (gemmtune_matmul_desc_create(&desc) != GEMMTUNE_SUCCESS) return 1;\n"
         "  gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_A_TYPE,"
         " &e4m3, sizeof e4m3);\n"
         "  const float* scales = 0;\n"
         "  gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER,"
         " &scales, sizeof scales);\n"
         "  int32_t groups = 8;\n"
         "  const int32_t* ends = 0;\n"
         "  gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_GROUPS,"
         " &groups, sizeof groups);\n"
         "  gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_GROUP_ENDS_POINTER,"
         " &ends, sizeof ends);\n"
         "  int32_t masked = GEMMTUNE_GROUP_LAYOUT_MASKED;\n"
         "  gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_GROUP_LAYOUT,"
         " &masked, sizeof masked);\n"
         "  int32_t fast = GEMMTUNE_ACCUMULATION_FAST;\n"
         "  gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_ACCUMULATION,"
         " &fast, sizeof fast);\n"
         "  int32_t bias = GEMMTUNE_BIAS_M, act = GEMMTUNE_ACTIVATION_GELU_TANH;\n"
         "  gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_BIAS,"
         " &bias, sizeof bias);\n"
         "  gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_ACTIVATION,"
         " &act, sizeof act);\n"
         "  const void* bias_values = 0;\n"
         "  void* d = 0;\n"
         "  gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_BIAS_POINTER,"
         " &bias_values, sizeof bias_values);\n"
         "  gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_D_POINTER,"
         " &d, sizeof d);\n"
         "  int32_t gate = GEMMTUNE_GATE_INTERLEAVED;\n"
         "  gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_GATE,"
         " &gate, sizeof gate);\n"
         "  gemmtune_matmul(-1, desc, 1, 1, 1, &one, 0, 1, 0, 1, &zero, 0, 1, 0);\n"
         "  return gemmtune_matmul_desc_destroy(desc);\n"
         "}\n";
  for (const char* std : {"c99", "c11"}) {
    const auto r = gemmtune::test::run_command("cc -std=" + std::string(std) +
                                               " -Wall -Wextra -Wstrict-prototypes -Werror "
                                               "-pedantic-errors "
                                               "-fsyntax-only " +
                                               include + " " + source.string());
    EXPECT_EQ(r.exit_code, 0) << std << ": " << r.output;
  }
  const auto r = gemmtune::test::run_command(
      "c++ -std=c++17 -Wall -Wextra -Werror -pedantic-errors -fsyntax-only -x c++ " + include +
      " " + source.string());
  EXPECT_EQ(r.exit_code, 0) << "c++17: " << r.output;
}

}  // namespace
