// The one instantiation of the TPC-H fixture: every TEST_P(TpchTest, ...) of this binary, in any
// file, runs on the runtime shapes of tpch::shapes().

#include <gtest/gtest.h>

#include "tpch_support.h"

namespace mx::test::tpch {

INSTANTIATE_TEST_SUITE_P(Shapes, TpchTest, ::testing::ValuesIn(shapes()), shape_name);

} // namespace mx::test::tpch
