// A command-line driver for TACOS's public API (astra-sim/tacos): synthesises an all-gather on
// a 2-D mesh or torus with the link figures given and prints one JSON line.
//
//   driver KIND WIDTH HEIGHT BANDWIDTH_GIBPS LATENCY_US CHUNKS_PER_NPU BUFFER_BYTES REPEATS
//
// KIND is `mesh` or `torus`. BUFFER_BYTES is the all-gather's output (every node's shard
// together); each node's shard is cut into CHUNKS_PER_NPU chunks, as TACOS's own example does.
// TACOS seeds its tie-breaks from std::random_device, so the synthesis is repeated REPEATS
// times and the fastest and slowest collective times are both printed, with the mean solve time.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <tacos/collective/all_gather.h>
#include <tacos/event_queue/timer.h>
#include <tacos/synthesizer/synthesizer.h>
#include <tacos/topology/mesh_2d.h>
#include <tacos/topology/torus_2d.h>

int main(int argc, char** argv) {
    if (argc != 9) {
        std::cerr << "usage: " << argv[0]
                  << " mesh|torus WIDTH HEIGHT BANDWIDTH_GIBPS LATENCY_US CHUNKS_PER_NPU"
                     " BUFFER_BYTES REPEATS\n";
        return 2;
    }
    const std::string kind = argv[1];
    const int width = std::atoi(argv[2]);
    const int height = std::atoi(argv[3]);
    const double bandwidth = std::atof(argv[4]);
    const double latency = std::atof(argv[5]);
    const int perNpu = std::atoi(argv[6]);
    const std::int64_t buffer = std::atoll(argv[7]);
    const int repeats = std::atoi(argv[8]);
    if ((kind != "mesh" && kind != "torus") || width < 2 || height < 2 || bandwidth <= 0 ||
        latency < 0 || perNpu < 1 || buffer < 1 || repeats < 1) {
        std::cerr << "driver: bad arguments\n";
        return 2;
    }

    std::unique_ptr<tacos::Topology> topology;
    if (kind == "mesh") {
        topology = std::make_unique<tacos::Mesh2D>(width, height, bandwidth, latency);
    } else {
        topology = std::make_unique<tacos::Torus2D>(width, height, bandwidth, latency);
    }
    const int npus = topology->npusCount();
    const std::int64_t chunkSize = buffer / (static_cast<std::int64_t>(npus) * perNpu);
    if (chunkSize < 1) {
        std::cerr << "driver: the buffer is smaller than one byte per chunk\n";
        return 2;
    }
    const auto collective = tacos::AllGather(npus, perNpu);

    double best = 0, worst = 0, solveUs = 0;
    for (int r = 0; r < repeats; ++r) {
        auto timer = tacos::Timer();
        timer.start();
        auto synthesizer = tacos::Synthesizer();
        const double time = synthesizer.solve(*topology, collective, chunkSize);
        timer.stop();
        solveUs += timer.time();
        best = r == 0 ? time : std::min(best, time);
        worst = r == 0 ? time : std::max(worst, time);
    }
    std::cout.precision(10);
    std::cout << "{\"kind\":\"" << kind << "\",\"width\":" << width << ",\"height\":" << height
              << ",\"npus\":" << npus << ",\"chunks_per_npu\":" << perNpu
              << ",\"chunk_bytes\":" << chunkSize << ",\"repeats\":" << repeats
              << ",\"collective_us_best\":" << best << ",\"collective_us_worst\":" << worst
              << ",\"solve_ms_mean\":" << solveUs / 1000.0 / repeats << "}" << std::endl;
    return 0;
}
