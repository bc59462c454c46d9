// GEMMTUNE_RECORD's lines: what the library writes, gemm-tune reads back as the same problem.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "cli_common.hpp"
#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/shape_recorder.hpp"
#include "support.hpp"

namespace gemmtune {
namespace {

Problem problem(DType dtype, const char* layout, int64_t m, int64_t n, int64_t k) {
  return make_problem(dtype, parse_op(layout[0]), parse_op(layout[1]), m, n, k);
}

// What gemm-tune --shapes makes of a line.
Problem read_back(const std::string& line) {
  const cli::ShapeLine s = cli::parse_shape_line(line.substr(0, line.find('#')));
  return cli::problem_of_line(s, "f32", "nn", 0.0f);
}

// Problems that differ in one thing each are recorded into one file once each, as lines of their
// own (the first recorded twice, a line the second time), and read back as they were.
void expect_recorded_apart(const std::vector<Problem>& problems) {
  test::TempDir dir;
  const auto file = dir / "shapes.txt";
  EXPECT_TRUE(record_shape(file, problems.at(0)));
  EXPECT_FALSE(record_shape(file, problems[0]));
  for (size_t i = 1; i < problems.size(); ++i)
    EXPECT_TRUE(record_shape(file, problems[i])) << problems[i].describe();
  const auto lines = cli::read_shapes_file(file.string());
  ASSERT_EQ(lines.size(), problems.size());
  for (size_t i = 0; i < lines.size(); ++i)
    EXPECT_EQ(cli::problem_of_line(lines[i], "f32", "nn", 0.0f), problems[i]) << lines[i].text;
}

TEST(ShapeRecorder, TightProblemsAreShapeDtypeAndLayout) {
  EXPECT_EQ(shape_line(problem(DType::bf16, "tn", 11008, 8, 4096)), "11008 8 4096 bf16 tn");
  EXPECT_EQ(shape_line(problem(DType::f32, "nn", 1, 1, 1)), "1 1 1 f32 nn");
}

TEST(ShapeRecorder, LeadingDimensionsAreWrittenWhereTheyAreNotTight) {
  Problem p = problem(DType::f16, "nt", 300, 200, 100);
  p.lda = 304;
  p.ldc = 320;
  p.align = alignment_class(p.types, nullptr, nullptr, nullptr, p.lda, p.ldb, p.ldc);
  EXPECT_EQ(shape_line(p), "300 200 100 f16 nt lda=304 ldc=320");
}

TEST(ShapeRecorder, AProblemThatReadsCSaysSo) {
  Problem p = problem(DType::bf16, "tn", 4096, 128, 4096);
  p.reads_c = true;  // a linear layer with a bias: beta = 1
  p.ldc = 4100;
  p.align = alignment_class(p.types, nullptr, nullptr, nullptr, p.lda, p.ldb, p.ldc);
  EXPECT_EQ(shape_line(p), "4096 128 4096 bf16 tn ldc=4100 beta=1");
}

TEST(ShapeRecorder, PointersLessAlignedThanTheLeadingDimensionsAreNoted) {
  Problem p = problem(DType::bf16, "tn", 4096, 8, 4096);
  p.align = 2;  // e.g. a view that starts one element into its buffer
  EXPECT_EQ(shape_line(p), "4096 8 4096 bf16 tn  # align=2");
}

TEST(ShapeRecorder, GemmTuneReadsEveryLineBackAsTheSameProblem) {
  std::vector<Problem> problems = {
      problem(DType::bf16, "tn", 11008, 8, 4096), problem(DType::f32, "nn", 48, 64, 32),
      problem(DType::f16, "tt", 300, 200, 100), problem(DType::bf16, "tn", 11008, 8, 4096)};
  problems[1].lda = 50;
  problems[2].ldb = 208;
  problems[3].reads_c = true;
  for (Problem& p : problems) {
    p.align = alignment_class(p.types, nullptr, nullptr, nullptr, p.lda, p.ldb, p.ldc);
    EXPECT_EQ(read_back(shape_line(p)).describe(), p.describe()) << shape_line(p);
  }
}

// Float8 problems: the line names the types as A*B->D and the scaling, and gemm-tune reads it
// back as the same problem (types, scaling, ops, sizes, leading dimensions, beta).
TEST(ShapeRecorder, Float8ProblemsKeepTheirTypesAndScaling) {
  Problem block = make_problem(parse_data_types("e4m3*e4m3->bf16"), Op::T, Op::N, 2112, 64, 7168);
  block.scaling = Scaling::block;
  EXPECT_EQ(shape_line(block), "2112 64 7168 e4m3*e4m3->bf16 tn scaling=block");
  Problem row = make_problem(parse_data_types("e4m3*e5m2->f16"), Op::N, Op::T, 300, 200, 128);
  row.scaling = Scaling::row;
  row.lda = 320;
  row.reads_c = true;
  row.align = alignment_class(row.types, nullptr, nullptr, nullptr, row.lda, row.ldb, row.ldc);
  EXPECT_EQ(shape_line(row), "300 200 128 e4m3*e5m2->f16 nt scaling=row lda=320 beta=1");
  Problem tensor = make_problem(parse_data_types("e5m2*e5m2->f32"), Op::T, Op::N, 11008, 8, 4096);
  tensor.scaling = Scaling::tensor;
  Problem acc = make_problem(parse_data_types("e4m3*e4m3->bf16+acc=f16"), Op::T, Op::N, 64, 64, 64);
  acc.scaling = Scaling::tensor;
  for (const Problem& p : {block, row, tensor, acc}) {
    EXPECT_EQ(read_back(shape_line(p)), p) << shape_line(p);
    EXPECT_EQ(read_back(shape_line(p)).describe(), p.describe()) << shape_line(p);
  }
  // The same shape with another scaling is another problem: a line of its own.
  Problem tensor_block = block;
  tensor_block.scaling = Scaling::tensor;
  expect_recorded_apart({block, tensor_block, row});
}

// The lines of a file, less its comments.
std::vector<std::string> problem_lines(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') out.push_back(line);
  return out;
}

// A float8 problem that accumulates fast says "accum=fast" after its scaling (precise, the
// default, writes nothing), so it is a line apart from the precise problem of the same sizes.
TEST(ShapeRecorder, AFastProblemSaysAccumFastAfterItsScaling) {
  Problem row = make_problem(parse_data_types("e4m3*e4m3->bf16"), Op::T, Op::N, 2112, 64, 7168);
  row.scaling = Scaling::row;
  row.accumulation = Accumulation::fast;
  EXPECT_EQ(shape_line(row), "2112 64 7168 e4m3*e4m3->bf16 tn scaling=row accum=fast");
  Problem tensor = make_problem(parse_data_types("e5m2*e4m3->f16"), Op::T, Op::N, 300, 40, 256);
  tensor.scaling = Scaling::tensor;
  tensor.accumulation = Accumulation::fast;
  tensor.lda = 272;
  tensor.reads_c = true;
  tensor.align =
      alignment_class(tensor.types, nullptr, nullptr, nullptr, tensor.lda, tensor.ldb, tensor.ldc);
  EXPECT_EQ(shape_line(tensor),
            "300 40 256 e5m2*e4m3->f16 tn scaling=tensor accum=fast lda=272 "
            "beta=1");
  Problem precise = row;
  precise.accumulation = Accumulation::precise;
  EXPECT_EQ(shape_line(precise), "2112 64 7168 e4m3*e4m3->bf16 tn scaling=row");

  test::TempDir dir;
  const auto file = dir / "shapes.txt";
  EXPECT_TRUE(record_shape(file, row));
  EXPECT_FALSE(record_shape(file, row));
  EXPECT_TRUE(record_shape(file, precise)) << "another problem: a line of its own";
  EXPECT_FALSE(record_shape(file, precise));
  EXPECT_TRUE(record_shape(file, tensor));
  EXPECT_EQ(problem_lines(file),
            (std::vector<std::string>{shape_line(row), shape_line(precise), shape_line(tensor)}));
}

// A problem whose store applies an epilogue says "epilogue=bias,gelu" (by its name, however it
// was spelled; none writes nothing, so the lines of earlier files stand for what they did), so
// it is a line apart from the plain problem of the same sizes, and reads back as the same problem.
TEST(ShapeRecorder, AFusedProblemSaysItsEpilogue) {
  Problem gelu = problem(DType::bf16, "tn", 4096, 8, 11008);
  gelu.epilogue = parse_epilogue("gelu,bias");
  EXPECT_EQ(shape_line(gelu), "4096 8 11008 bf16 tn epilogue=bias,gelu");
  Problem silu = problem(DType::f16, "nt", 300, 40, 256);
  silu.epilogue = parse_epilogue("bias_n,silu");
  silu.ldc = 304;
  silu.reads_c = true;  // a residual add besides the bias
  silu.align = alignment_class(silu.types, nullptr, nullptr, nullptr, silu.lda, silu.ldb, silu.ldc);
  EXPECT_EQ(shape_line(silu), "300 40 256 f16 nt epilogue=bias_n,silu ldc=304 beta=1");
  Problem scaled = make_problem(parse_data_types("e4m3*e4m3->bf16"), Op::T, Op::N, 2112, 64, 7168);
  scaled.scaling = Scaling::row;
  scaled.accumulation = Accumulation::fast;
  scaled.epilogue = parse_epilogue("relu");
  EXPECT_EQ(shape_line(scaled),
            "2112 64 7168 e4m3*e4m3->bf16 tn scaling=row accum=fast epilogue=relu");
  Problem plain = gelu;
  plain.epilogue = Epilogue{};
  EXPECT_EQ(shape_line(plain), "4096 8 11008 bf16 tn");
  for (const Problem& p : {gelu, silu, scaled}) {
    EXPECT_EQ(read_back(shape_line(p)), p) << shape_line(p);
    EXPECT_EQ(read_back(shape_line(p)).describe(), p.describe()) << shape_line(p);
  }
  // Another activation, or none, is another problem: a line of its own.
  Problem relu = gelu;
  relu.epilogue = parse_epilogue("bias,relu");
  expect_recorded_apart({gelu, plain, relu, silu});
}

// An f32 problem computed with tf32 or 3xtf32 says "precision=" (exact, the default, writes
// nothing, so the lines of earlier files stand for what they did): a line apart from the exact
// problem of the same sizes, read back as the same problem.
TEST(ShapeRecorder, AnF32ProblemOnTensorCoresSaysItsPrecision) {
  Problem tf32 = problem(DType::f32, "nt", 4096, 512, 1024);
  tf32.precision = Precision::tf32;
  EXPECT_EQ(shape_line(tf32), "4096 512 1024 f32 nt precision=tf32");
  Problem three = tf32;
  three.precision = Precision::tf32x3;
  three.epilogue = parse_epilogue("bias");
  three.reads_c = true;
  EXPECT_EQ(shape_line(three), "4096 512 1024 f32 nt precision=3xtf32 epilogue=bias beta=1");
  const Problem exact = problem(DType::f32, "nt", 4096, 512, 1024);
  EXPECT_EQ(shape_line(exact), "4096 512 1024 f32 nt");
  for (const Problem& p : {tf32, three}) {
    EXPECT_EQ(read_back(shape_line(p)), p) << shape_line(p);
    EXPECT_EQ(read_back(shape_line(p)).describe(), p.describe()) << shape_line(p);
  }
  Problem three_plain = three;
  three_plain.epilogue = Epilogue{};
  three_plain.reads_c = false;
  expect_recorded_apart({tf32, exact, three_plain});
}

// A grouped problem's line says N as gemm-tune --groups takes it, the mean columns of a group,
// and reads back as the same problem.
TEST(ShapeRecorder, AGroupedProblemWritesItsGroupsAndTheMeanN) {
  Problem moe = problem(DType::bf16, "tn", 1536, 32768, 2048);
  moe.groups = 128;
  EXPECT_EQ(shape_line(moe), "1536 256 2048 bf16 tn groups=128");
  EXPECT_EQ(read_back(shape_line(moe)), moe);
  Problem padded = problem(DType::f16, "nt", 300, 8 * 100, 128);
  padded.groups = 8;
  padded.lda = 304;  // leading dimensions that are not tight, and beta != 0, as for one GEMM
  padded.ldb = 808;
  padded.reads_c = true;
  padded.align =
      alignment_class(padded.types, nullptr, nullptr, nullptr, padded.lda, padded.ldb, padded.ldc);
  EXPECT_EQ(shape_line(padded), "300 100 128 f16 nt groups=8 lda=304 ldb=808 beta=1");
  EXPECT_EQ(read_back(shape_line(padded)), padded);
  EXPECT_EQ(read_back(shape_line(padded)).describe(), padded.describe());

  // One GEMM of the same sizes, and other groups, are other problems: lines of their own.
  Problem other_groups = moe;
  other_groups.groups = 64;
  expect_recorded_apart({moe, problem(DType::bf16, "tn", 1536, 32768, 2048), other_groups});

  // Float8 experts (scaled_grouped_mm's): the scaling and the groups, read back the same; each
  // scaling a line of its own.
  Problem experts = make_problem(DataTypes{DType::e4m3, DType::e4m3, DType::bf16, DType::bf16},
                                 Op::T, Op::N, 4096, 32 * 512, 7168);
  experts.groups = 32;
  experts.scaling = Scaling::block;
  EXPECT_EQ(shape_line(experts), "4096 512 7168 e4m3*e4m3->bf16 tn scaling=block groups=32");
  EXPECT_EQ(read_back(shape_line(experts)), experts);
  Problem rowwise = experts;
  rowwise.scaling = Scaling::row;
  expect_recorded_apart({experts, rowwise});
}

// N that G does not divide cannot be said as a mean: the line rounds it up, to the nearest problem
// it can name (with the tight leading dimensions of that N), and its comment keeps the N.
TEST(ShapeRecorder, AGroupedNThatGroupsDoNotDivideIsRoundedUp) {
  Problem ragged = problem(DType::f16, "nt", 64, 1001, 32);  // B's leading dimension is N
  ragged.groups = 8;
  EXPECT_EQ(shape_line(ragged), "64 126 32 f16 nt groups=8  # n=1001");
  const Problem back = read_back(shape_line(ragged));
  EXPECT_EQ(back.n, 8 * 126);
  EXPECT_EQ(back.ldb, 8 * 126) << "the tight ldb of the rounded N, not 1001";
  EXPECT_EQ(back.groups, 8);
  ragged.ldb = 1024;  // one above the rounded N's is kept
  ragged.align =
      alignment_class(ragged.types, nullptr, nullptr, nullptr, ragged.lda, ragged.ldb, ragged.ldc);
  EXPECT_EQ(shape_line(ragged), "64 126 32 f16 nt groups=8 ldb=1024  # n=1001");
  EXPECT_EQ(read_back(shape_line(ragged)).ldb, 1024);
}

// A masked grouped problem's line says groups=G group_layout=masked with N a group's capacity
// (n / G, which G always divides), and reads back as the same problem; the contiguous problem of
// the same sizes is another line.
TEST(ShapeRecorder, AMaskedProblemWritesItsLayoutAndTheCapacity) {
  Problem decode = problem(DType::bf16, "tn", 1536, 32768, 2048);
  decode.groups = 128;
  decode.group_layout = GroupLayout::masked;
  EXPECT_EQ(shape_line(decode), "1536 256 2048 bf16 tn groups=128 group_layout=masked");
  EXPECT_EQ(read_back(shape_line(decode)), decode);
  EXPECT_EQ(read_back(shape_line(decode)).group_capacity(), 256);
  Problem padded = problem(DType::f16, "nn", 300, 8 * 64, 128);
  padded.groups = 8;
  padded.group_layout = GroupLayout::masked;
  padded.ldc = 304;  // leading dimensions that are not tight, and beta != 0, as for one GEMM
  padded.reads_c = true;
  padded.align =
      alignment_class(padded.types, nullptr, nullptr, nullptr, padded.lda, padded.ldb, padded.ldc);
  EXPECT_EQ(shape_line(padded), "300 64 128 f16 nn groups=8 group_layout=masked ldc=304 beta=1");
  EXPECT_EQ(read_back(shape_line(padded)), padded);

  Problem contiguous = decode;
  contiguous.group_layout = GroupLayout::contiguous;
  expect_recorded_apart({decode, contiguous});
}

TEST(ShapeRecorder, AppendsEachProblemOnceUnderAHeader) {
  test::TempDir dir;
  const auto file = dir / "deep/folder/shapes.txt";
  const Problem a = problem(DType::bf16, "tn", 4096, 1, 4096);
  const Problem b = problem(DType::bf16, "tn", 4096, 2, 4096);
  EXPECT_TRUE(record_shape(file, a));
  EXPECT_FALSE(record_shape(file, a));
  EXPECT_TRUE(record_shape(file, b));
  Problem reads_c = b;  // the same shape with beta != 0: tuned apart, so a line of its own
  reads_c.reads_c = true;
  EXPECT_TRUE(record_shape(file, reads_c));
  EXPECT_FALSE(record_shape(file, reads_c));
  // gemm-tune reads the file: the header is a comment, each problem one line.
  const auto shapes = cli::read_shapes_file(file.string());
  ASSERT_EQ(shapes.size(), 3u);
  EXPECT_EQ(shapes[0].n, 1);
  EXPECT_EQ(shapes[1].n, 2);
  EXPECT_FALSE(shapes[1].beta.has_value());
  EXPECT_EQ(shapes[2].n, 2);
  EXPECT_EQ(shapes[2].beta, 1.0f);
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str().rfind("# Problems served without a tuned kernel (GEMMTUNE_RECORD).", 0), 0u);
}

TEST(ShapesFile, ALinesBetaDecidesWhetherItsProblemReadsC) {
  const cli::ShapeLine half = cli::parse_shape_line("64 64 64 bf16 tn beta=0.5");
  EXPECT_EQ(half.beta, 0.5f);
  EXPECT_TRUE(cli::problem_of_line(half, "f32", "nn", 0.0f).reads_c);
  // The line's beta wins over the command line's, either way.
  EXPECT_FALSE(
      cli::problem_of_line(cli::parse_shape_line("64 64 64 beta=0"), "f32", "nn", 1.0f).reads_c);
  EXPECT_TRUE(cli::problem_of_line(cli::parse_shape_line("64 64 64"), "f32", "nn", 1.0f).reads_c);
  EXPECT_FALSE(
      cli::problem_of_line(cli::parse_shape_line("64x64x64 f16"), "f32", "nn", 0.0f).reads_c);
  for (const char* bad :
       {"64 64 64 beta=x", "64 64 64 beta=nan", "64 64 64 beta=", "64 64 64 lda=64x"}) {
    try {
      cli::parse_shape_line(bad);
      ADD_FAILURE() << bad << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << bad;
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(ShapeRecorder, AFileThatCannotBeWrittenIsAnIoError) {
  test::TempDir dir;
  try {
    record_shape(dir.path(), problem(DType::f32, "nn", 2, 2, 2));  // a folder, not a file
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::io);
    EXPECT_NE(std::string(e.what()).find("GEMMTUNE_RECORD: cannot open"), std::string::npos);
  }
}

}  // namespace
}  // namespace gemmtune
