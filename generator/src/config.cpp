#include "gemmtune/generator/config.hpp"

#include <nlohmann/json.hpp>

#include "gemmtune/generator/util.hpp"

namespace gemmtune {

std::string ArchInfo::name() const {
  return fmt::format("sm_{}{}", cc, arch_specific ? "a" : "");
}

ArchInfo ArchInfo::from_name(std::string_view name) {
  ArchInfo a;
  a.regs_per_sm = 65536;  // every architecture from sm_50 on
  a.max_threads_per_block = 1024;
  std::string_view s = name;
  if (s.starts_with("sm_")) s.remove_prefix(3);
  a.arch_specific = s.ends_with("a");
  if (a.arch_specific) s.remove_suffix(1);
  // Ceilings of a typical part: A100 SXM, RTX 3090, RTX 4090, H100 SXM.
  if (s == "80") {
    a.cc = 80;
    a.sms = 108;
    a.smem_per_block = 163 * 1024;
    a.smem_per_sm = 164 * 1024;
    a.clock_ghz = 1.41;
    a.dram_gb_per_s = 2039;
    a.l2_bytes = 40 << 20;
  } else if (s == "86") {
    a.cc = 86;
    a.sms = 84;
    a.smem_per_block = 99 * 1024;
    a.smem_per_sm = 100 * 1024;
    a.clock_ghz = 1.70;
    a.dram_gb_per_s = 936;
    a.l2_bytes = 6 << 20;
  } else if (s == "89") {
    a.cc = 89;
    a.sms = 128;
    a.smem_per_block = 99 * 1024;
    a.smem_per_sm = 100 * 1024;
    a.clock_ghz = 2.52;
    a.dram_gb_per_s = 1008;
    a.l2_bytes = 72 << 20;
  } else if (s == "90") {
    a.cc = 90;
    a.sms = 132;
    a.smem_per_block = 227 * 1024;
    a.smem_per_sm = 228 * 1024;
    a.clock_ghz = 1.755;
    a.dram_gb_per_s = 3350;
    a.l2_bytes = 50 << 20;
  } else {
    GT_THROW(Errc::invalid_argument,
             "unknown architecture '{}' (expected sm_80, sm_86, sm_89, sm_90 or sm_90a)", name);
  }
  GT_REQUIRE(!a.arch_specific || a.cc == 90, Errc::invalid_argument,
             "'{}': only sm_90 has an arch-specific ('a') target here", name);
  return a;
}

double ArchInfo::flops_per_clock_per_sm(const DataTypes& types) const {
  const bool tensor = types.a != DataType::f32;
  // Float8 tensor cores (Hopper, Ada) run twice the 16-bit rate.
  const bool fp8 = element_bytes(types.a) == 1;
  if (cc >= 90) return fp8 ? 8192 : tensor ? 4096 : 256;
  if (cc == 89 && fp8) return 2048;
  if (cc == 80) return tensor ? 2048 : 128;
  if (cc >= 86) return tensor ? 1024 : 256;
  return tensor ? 1024 : 128;
}

double ArchInfo::tf32_flops_per_clock_per_sm() const {
  return flops_per_clock_per_sm(DataTypes::uniform(DataType::bf16)) / 2;
}

double ArchInfo::flops_per_clock_per_sm(const Problem& p) const {
  switch (p.precision) {
    case Precision::exact:
      break;
    case Precision::tf32:
      return tf32_flops_per_clock_per_sm();
    case Precision::tf32x3:
      return tf32_flops_per_clock_per_sm() / 3;
  }
  return flops_per_clock_per_sm(p.types);
}

ArchInfo ArchInfo::from_cc(int cc) {
  for (const char* known : {"sm_80", "sm_86", "sm_89", "sm_90a"}) {
    const ArchInfo a = from_name(known);
    if (a.cc == cc) return a;
  }
  ArchInfo a = from_name("sm_90");
  a.cc = cc;
  return a;
}

int64_t KernelConfig::at(std::string_view param) const {
  auto it = params.find(std::string(param));
  GT_REQUIRE(it != params.end(), Errc::internal, "config of family '{}' has no parameter '{}'",
             family, param);
  return it->second;
}

std::string KernelConfig::params_text() const {
  std::string out;
  for (const auto& [name, value] : params) {
    if (!out.empty()) out += ' ';
    out += fmt::format("{}={}", name, value);
  }
  return out;
}

std::string KernelConfig::to_json() const {
  nlohmann::json j;
  j["family"] = family;
  j["types"] = types.name();
  j["scaling"] = std::string(to_string(scaling));
  j["layout"] = layout();
  j["params"] = params;
  if (!epilogue.none()) j["epilogue"] = epilogue.name();
  return j.dump();
}

KernelConfig KernelConfig::from_json(std::string_view text) {
  try {
    auto j = nlohmann::json::parse(text);
    KernelConfig c;
    c.family = j.at("family").get<std::string>();
    c.types = j.contains("types")
                  ? parse_data_types(j.at("types").get<std::string>())
                  : DataTypes::uniform(parse_data_type(j.at("dtype").get<std::string>()));
    if (j.contains("scaling")) c.scaling = parse_scaling(j.at("scaling").get<std::string>());
    auto layout = j.at("layout").get<std::string>();
    GT_REQUIRE(layout.size() == 2, Errc::invalid_argument, "layout '{}' is not two letters",
               layout);
    c.op_a = parse_op(layout[0]);
    c.op_b = parse_op(layout[1]);
    c.params = j.at("params").get<std::map<std::string, int64_t>>();
    if (j.contains("epilogue")) c.epilogue = parse_epilogue(j.at("epilogue").get<std::string>());
    return c;
  } catch (const nlohmann::json::exception& e) {
    GT_THROW(Errc::invalid_argument, "bad kernel config JSON: {}", e.what());
  }
}

}  // namespace gemmtune
