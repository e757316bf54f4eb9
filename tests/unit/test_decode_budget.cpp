// The serve frontend's budget of decoded pixels in flight (serve/decode_budget.h): the decoders
// announce what they are about to allocate before allocating it, a request reserves that much or
// waits for room, and the frontend answers 422 for an image larger than the whole budget and 503 +
// Retry-After when no room comes in time (in process: a fake preprocessor reserves what its body
// says, tests/serve_test_util.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include <nlohmann/json.hpp>

#include "image_test_util.h"
#include "serve/decode_budget.h"
#include "serve_test_util.h"
#include "shoplens/data/image_io.h"

namespace shoplens::testing {
namespace {

using serve::DecodeBudget;
using serve::DecodeBudgetBusy;
using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(DecodeBudget, ReservationsAddUpAndAreGivenBackOutOfScope) {
  DecodeBudget budget(milliseconds(0), 1000);
  {
    DecodeBudget::Reservation a(budget), b(budget);
    a.add(600);
    b.add(400);
    EXPECT_EQ(budget.in_use(), 1000u);
  }
  EXPECT_EQ(budget.in_use(), 0u);
}

TEST(DecodeBudget, MoreThanTheWholeBudgetIsRefusedAtOnceNamingTheFlag) {
  DecodeBudget budget(milliseconds(600000), 1000);
  DecodeBudget::Reservation r(budget);
  EXPECT_THAT([&] { r.add(1001); }, ThrowsMessage<DataError>(HasSubstr("--decode-budget-mb")));
  EXPECT_EQ(budget.in_use(), 0u);
}

TEST(DecodeBudget, NoRoomWithinTheWaitIsBusy) {
  DecodeBudget budget(milliseconds(50), 1000);
  DecodeBudget::Reservation held(budget);
  held.add(700);
  DecodeBudget::Reservation late(budget);
  EXPECT_THROW(late.add(400), DecodeBudgetBusy);
  EXPECT_EQ(budget.in_use(), 700u);
}

TEST(DecodeBudget, AWaiterGetsInOnceRoomIsGivenBack) {
  DecodeBudget budget(milliseconds(600000), 1000);
  auto held = std::make_unique<DecodeBudget::Reservation>(budget);
  held->add(700);
  std::atomic<bool> in{false};
  std::thread waiter([&] {
    DecodeBudget::Reservation r(budget);
    r.add(400);
    in = true;
  });
  EXPECT_FALSE(in);
  held.reset();
  waiter.join();
  EXPECT_TRUE(in);
  EXPECT_EQ(budget.in_use(), 0u);
}

// Every decoder announces what it allocates, before it allocates it: the full RGB image, and the
// working copies TIFF (its RGBA raster) and CMYK JPEG (the CMYK pixels) hold beside it.
TEST(DecodeBudget, DecodersAnnounceTheirPixelsBeforeAllocating) {
  const cv::Mat picture = test_picture(40, 30, 1);
  const std::uint64_t rgb = 40 * 30 * 3;
  const auto announced = [](const Bytes& bytes, DecodeOptions options = {}) {
    std::vector<std::uint64_t> seen;
    options.before_allocating = [&](std::uint64_t n) { seen.push_back(n); };
    decode_image(bytes.data(), bytes.size(), options);
    return seen;
  };
  using V = std::vector<std::uint64_t>;
  EXPECT_EQ(announced(png_bytes(picture)), V{rgb});
  EXPECT_EQ(announced(webp_bytes(picture, true)), V{rgb});
  EXPECT_EQ(announced(bmp_bytes(picture, 24, false)), V{rgb});
  EXPECT_EQ(announced(tiff_bytes(picture)), V{40 * 30 * 7});
  EXPECT_EQ(announced(encode_jpeg(picture, 90)), V{rgb});
  EXPECT_EQ(announced(cmyk_jpeg(false)), V{32 * 32 * 7});
  DecodeOptions scaled;
  scaled.min_short_side = 15;  // TurboJPEG decodes at 1/2 scale: 20 x 15
  EXPECT_EQ(announced(encode_jpeg(picture, 90), scaled), V{20 * 15 * 3});
}

// A refusal from the budget stops the decode before the image's memory is taken: a header that
// declares 9990 x 9990 costs nothing when the hook throws.
TEST(DecodeBudget, AHookThatThrowsStopsTheDecodeBeforeItAllocates) {
  DecodeOptions options;
  std::uint64_t asked = 0;
  options.before_allocating = [&](std::uint64_t n) {
    asked = n;
    throw DecodeBudgetBusy("no room");
  };
  const Bytes huge = blank_png(9990, 9990);
  EXPECT_LT(huge.size(), 100000u);
  EXPECT_THROW(decode_image(huge.data(), huge.size(), options), DecodeBudgetBusy);
  EXPECT_EQ(asked, 9990ull * 9990 * 3);
}

TEST(DecodeBudget, ABlankPngDecodesInFull) {
  const Bytes png = blank_png(300, 200);
  const DecodedImage image = decode_image(png.data(), png.size());
  EXPECT_EQ(image.rgb.cols, 300);
  EXPECT_EQ(image.rgb.rows, 200);
  EXPECT_EQ(cv::countNonZero(image.rgb.reshape(1)), 0);
}

std::string classify(const std::string& body) {
  return "POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

RawReply post(int port, const std::string& body) {
  RawConnection c(port);
  c.send(classify(body));
  return c.read_reply(60);
}

double metric(int port, const std::string& name) {
  RawConnection c(port);
  c.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string text = c.read_reply(60).body;
  const auto at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
}

serve::FrontendOptions options_with_request_timeout(double ms) {
  serve::FrontendOptions o;
  o.http_threads = 8;
  o.request_timeout_ms = ms;
  return o;
}

TEST(ServeDecodeBudget, AnImageLargerThanTheBudgetGets422NamingTheFlag) {
  InProcessServer server(options_with_request_timeout(2000));
  server.frontend().set_decode_budget(1000);
  const RawReply r = post(server.port(), fake_png_decoding(1001));
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(r.body.find("--decode-budget-mb"), std::string::npos) << r.body;
  EXPECT_EQ(post(server.port(), fake_png_decoding(1000)).status, 200);
  EXPECT_EQ(metric(server.port(), "shoplens_serve_decode_budget_bytes"), 1000);
}

// One request holds most of the budget; another that needs more than what is left waits its
// request timeout for room, then gets 503 with Retry-After; once the first is done, room is back.
TEST(ServeDecodeBudget, NoRoomWithinTheRequestTimeoutGets503WithRetryAfter) {
  InProcessServer server(options_with_request_timeout(200));
  server.frontend().set_decode_budget(1000);
  auto holder = std::async(std::launch::async, [&] { return post(server.port(), fake_png_decoding(800, 3000)); });
  for (int i = 0; i < 6000 && metric(server.port(), "shoplens_serve_decode_bytes_in_use") < 800; ++i)
    std::this_thread::sleep_for(milliseconds(10));
  ASSERT_EQ(metric(server.port(), "shoplens_serve_decode_bytes_in_use"), 800);
  const RawReply busy = post(server.port(), fake_png_decoding(400));
  EXPECT_EQ(busy.status, 503) << busy.body;
  EXPECT_NE(busy.head.find("Retry-After: "), std::string::npos) << busy.head;
  EXPECT_NE(busy.body.find("--decode-budget-mb"), std::string::npos) << busy.body;
  EXPECT_EQ(holder.get().status, 200);
  EXPECT_EQ(post(server.port(), fake_png_decoding(400)).status, 200);
  EXPECT_EQ(metric(server.port(), "shoplens_serve_decode_bytes_in_use"), 0);
}

}  // namespace
}  // namespace shoplens::testing
