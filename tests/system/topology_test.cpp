// Topology: detection of the real machine, simulated NUMA shapes, and parsing of "RxC".

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include <mx/system/topology.h>
#include <mx/tasking/runtime.h>

namespace {

using mx::system::parse_simulated_shape;
using mx::system::Topology;

bool usable(const Topology &topology, std::uint16_t cpu) {
    const auto &cpus = topology.usable_cpus();
    return std::find(cpus.begin(), cpus.end(), cpu) != cpus.end();
}

/// Regions are numbered densely from 0, cores are grouped by region, every region has a core.
void expect_grouped_by_region(const Topology &topology) {
    const auto &cores = topology.cores();
    ASSERT_FALSE(cores.empty());
    std::set<std::uint8_t> regions;
    for (std::size_t i = 0; i < cores.size(); ++i) {
        EXPECT_LT(cores[i].numa_region, topology.numa_regions()) << "core " << i;
        EXPECT_TRUE(usable(topology, cores[i].cpu)) << "core " << i << " on cpu " << cores[i].cpu;
        EXPECT_LT(cores[i].memory_node, std::max<std::uint16_t>(topology.memory_nodes(), 1)) << "core " << i;
        if (i > 0) {
            EXPECT_LE(cores[i - 1].numa_region, cores[i].numa_region) << "cores are not grouped by region";
        }
        regions.insert(cores[i].numa_region);
    }
    EXPECT_EQ(regions.size(), topology.numa_regions()) << "a region without cores";
}

TEST(TopologyTest, DetectFindsTheMachine) {
    const Topology topology = Topology::detect();
    EXPECT_FALSE(topology.is_simulated());
    ASSERT_GE(topology.usable_cpus().size(), 1U);
    EXPECT_EQ(topology.cores().size(), topology.usable_cpus().size()) << "one core per usable cpu";
    EXPECT_GE(topology.numa_regions(), 1U);
    EXPECT_GE(topology.memory_nodes(), 1U);
    EXPECT_LE(topology.numa_regions(), topology.memory_nodes());
    expect_grouped_by_region(topology);
    // Every usable cpu appears exactly once.
    std::set<std::uint16_t> cpus;
    for (const auto &core : topology.cores()) {
        EXPECT_TRUE(cpus.insert(core.cpu).second) << "cpu " << core.cpu << " listed twice";
    }
    EXPECT_GE(topology.cache_line_size(), 16U);
    EXPECT_GT(topology.l1d_size(), 0U);
    EXPECT_FALSE(topology.describe().empty());
}

TEST(TopologyTest, MemoryNodeOfUnknownCpuIsZero) {
    const Topology topology = Topology::detect();
    EXPECT_EQ(topology.memory_node_of_cpu(60000), 0);
    for (const auto &core : topology.cores()) {
        EXPECT_EQ(topology.memory_node_of_cpu(core.cpu), core.memory_node);
    }
}

TEST(TopologyTest, Simulated2x1HasTwoRegions) {
    const Topology topology = Topology::simulated({2, 1});
    EXPECT_TRUE(topology.is_simulated());
    EXPECT_EQ(topology.numa_regions(), 2U);
    ASSERT_EQ(topology.cores().size(), 2U);
    EXPECT_EQ(topology.cores()[0].numa_region, 0);
    EXPECT_EQ(topology.cores()[1].numa_region, 1);
    expect_grouped_by_region(topology);
    EXPECT_NE(topology.describe().find("simulated"), std::string::npos) << topology.describe();
}

TEST(TopologyTest, SimulatedShapesMapOntoUsableCpus) {
    for (const auto shape : {mx::system::SimulatedShape{2, 2}, mx::system::SimulatedShape{4, 2},
                             mx::system::SimulatedShape{3, 5}, mx::system::SimulatedShape{1, 1}}) {
        SCOPED_TRACE(std::to_string(shape.regions) + "x" + std::to_string(shape.cores_per_region));
        const Topology topology = Topology::simulated(shape);
        EXPECT_EQ(topology.numa_regions(), shape.regions);
        ASSERT_EQ(topology.cores().size(), std::size_t{shape.regions} * shape.cores_per_region);
        for (std::size_t i = 0; i < topology.cores().size(); ++i) {
            EXPECT_EQ(topology.cores()[i].numa_region, i / shape.cores_per_region) << "core " << i;
            // Core i runs on usable cpu i mod n (oversubscribed when the shape is larger).
            const auto &cpus = topology.usable_cpus();
            EXPECT_EQ(topology.cores()[i].cpu, cpus[i % cpus.size()]) << "core " << i;
        }
        expect_grouped_by_region(topology);
    }
}

TEST(ParseSimulatedShapeTest, AcceptsRxC) {
    struct Case {
        std::string_view text;
        std::uint16_t regions;
        std::uint16_t cores;
    };
    for (const Case c : {Case{"2x1", 2, 1}, Case{"1x1", 1, 1}, Case{"2x2", 2, 2}, Case{"4x2", 4, 2},
                         Case{"64x1", 64, 1}, Case{"1x4096", 1, 4096}, Case{"8x16", 8, 16}}) {
        SCOPED_TRACE(c.text);
        const auto parsed = parse_simulated_shape(c.text);
        ASSERT_TRUE(parsed.shape.has_value()) << parsed.error;
        EXPECT_EQ(parsed.shape->regions, c.regions);
        EXPECT_EQ(parsed.shape->cores_per_region, c.cores);
        EXPECT_TRUE(parsed.error.empty());
    }
}

TEST(ParseSimulatedShapeTest, RejectsMalformedAndOutOfRange) {
    for (const std::string_view text : {"", "zz", "x", "2", "2x", "x2", "0x1", "1x0", "0x0", "-1x2", "2x-1",
                                        "2x1x1", " 2x1", "2x1 ", "2.5x1", "65x1", "64x65", "99999999999x1"}) {
        // Built with append(): GCC 12 at -O3 warns falsely (-Wrestrict) on chained operator+.
        std::string quoted;
        quoted.append("'").append(text).append("'");
        SCOPED_TRACE(quoted);
        const auto parsed = parse_simulated_shape(text);
        EXPECT_FALSE(parsed.shape.has_value());
        EXPECT_FALSE(parsed.error.empty());
        EXPECT_NE(parsed.error.find(quoted), std::string::npos)
            << "the message should quote the input: " << parsed.error;
    }
}

TEST(ParseSimulatedShapeTest, RejectsOutOfRangeBeforeTheProductOverflows) {
    // 2 x 2147483649 wraps to 2 in 32 bits and 65536 x 65537 to 65536; the other values exceed
    // one limit each, or 64 bits.
    for (const std::string_view text :
         {"2x2147483649", "65536x65537", "4294967297x1", "1x4294967297", "2x9223372036854775809", "1x4097",
          "4096x2", "2x2049", "32x129", "99999999999999999999999x1", "1x99999999999999999999999"}) {
        std::string quoted;
        quoted.append("'").append(text).append("'");
        SCOPED_TRACE(quoted);
        const auto parsed = parse_simulated_shape(text);
        EXPECT_FALSE(parsed.shape.has_value());
        EXPECT_NE(parsed.error.find("out of range"), std::string::npos) << parsed.error;
    }
}

TEST(ParseSimulatedShapeTest, RuntimeTurnsAnOverflowingShapeIntoConfigError) {
    mx::tasking::RuntimeConfig config;
    config.workers = 1;
    config.topology = "2x2147483649";
    EXPECT_THROW(mx::tasking::Runtime{config}, mx::tasking::ConfigError);
}

} // namespace
