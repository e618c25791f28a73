// Helpers shared by the tests.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataecho/core/dataset.h"
#include "dataecho/core/pipeline.h"

namespace dataecho::testing {

// Every element left in the iterator / pipeline.
std::vector<Example> drain(Iterator& it);
std::vector<Example> drain(Pipeline& p, int64_t limit = -1);
// Row ids of the elements, flattened (a batch contributes all its rows).
std::vector<int64_t> ids(const std::vector<Example>& elements);
std::vector<int32_t> echoes(const std::vector<Example>& elements);
std::vector<int64_t> values(const std::vector<Example>& elements,
                            const std::string& field = "value");
std::vector<int64_t> iota(int64_t n, int64_t start = 0);

std::unique_ptr<Pipeline> build(const std::string& json_text);
std::vector<Example> run(const std::string& json_text, int64_t limit = -1);

// The message of the dataecho::Error that `fn` throws; fails the test if none.
std::string error_of(const std::function<void()>& fn);

// Expects `text` (a string) to contain `part` (a string or string literal), and shows the
// text when it does not.
#define EXPECT_CONTAINS(text, part)                                    \
  do {                                                                 \
    std::string text_ = (text);                                        \
    EXPECT_NE(text_.find(part), std::string::npos) << "in: " << text_; \
  } while (0)

// A fresh temporary directory, removed at exit of the test program.
std::string temp_dir();

// `lines` lines of 3 to 8 words drawn from a small vocabulary, each ending in "\n": text
// for the language model's tests, where the next byte is well predicted from the word so
// far, so a model that uses its context goes well below the text's unigram entropy.
std::string word_lines(int lines, uint32_t seed);

// `bytes` gzip-compressed (with an FEXTRA field "RA", as dictzip writes its chunk index,
// when `dictzip`).
std::string gzip_bytes(const std::string& bytes, bool dictzip = false);

// Writes `bytes` to `path`, making its folders.
void write_file(const std::string& path, const std::string& bytes);

// Writes gzip_bytes(bytes, dictzip) to `path`; returns `path`.
std::string write_gzip(const std::string& path, const std::string& bytes, bool dictzip = false);

// Forks and runs argv[0] (a path) with `argv`; the child is killed when the thread that
// started it ends (PR_SET_PDEATHSIG), so a failed test leaves no server behind. `stdio`
// gives the descriptors the child takes as its standard input, output and error (-1: the
// parent's). The caller waits for the child.
int spawn_tied(const std::vector<std::string>& argv,
               const std::array<int, 3>& stdio = {-1, -1, -1});

// A TCP socket listening on 127.0.0.1 at a free port, which is stored in `*port`;
// throws std::runtime_error when it cannot listen. The caller closes it.
int listen_loopback(int* port);
// Sends the `n` bytes at `p` on the socket `fd`, stopping at the first failure.
void send_all(int fd, const char* p, size_t n);

// Reads `first` elements of `pipeline`, calls `stop` (a server goes down), reads on in
// another thread, and after 2 s calls `restart` (when given; else the reading ends on its
// own); returns every element read. `error` gets the text of an exception the reading
// ended with ("" if none). The restart tests of HTTP, HTTPS and S3.
std::vector<Example> read_through_outage(Pipeline& pipeline, int first,
                                         const std::function<void()>& stop,
                                         const std::function<void()>& restart, std::string& error);

// Saves after k elements, restores into a fresh pipeline from the same spec, and checks
// that the rest equals an uninterrupted run. Returns the uninterrupted run.
void expect_save_restore_identical(const std::string& json_text,
                                   const std::vector<int64_t>& save_points);

}  // namespace dataecho::testing
