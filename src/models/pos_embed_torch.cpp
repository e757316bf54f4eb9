// Position-embedding resampling, so ViT weights trained at one resolution load at another.
#include <cmath>

#include <torch/torch.h>

#include "models_internal.h"

namespace shoplens::detail {
namespace {

int perfect_square_root(std::int64_t n) {
  if (n < 1) return -1;
  const auto r = static_cast<std::int64_t>(std::llround(std::sqrt(static_cast<double>(n))));
  return r * r == n ? static_cast<int>(r) : -1;
}

}  // namespace

std::optional<at::Tensor> resample_pos_embed(const at::Tensor& src, c10::IntArrayRef shape) {
  if (src.dim() != 3 || shape.size() != 3 || src.size(0) != 1 || shape[0] != 1 || src.size(2) != shape[2])
    return std::nullopt;
  const int old_grid = perfect_square_root(src.size(1) - 1), new_grid = perfect_square_root(shape[1] - 1);
  if (old_grid < 1 || new_grid < 1) return std::nullopt;
  const auto dim = src.size(2);
  namespace F = torch::nn::functional;
  auto grid = src.slice(1, 1).to(at::kFloat).reshape({1, old_grid, old_grid, dim}).permute({0, 3, 1, 2});
  grid = F::interpolate(grid, F::InterpolateFuncOptions()
                                  .size(std::vector<int64_t>{new_grid, new_grid})
                                  .mode(torch::kBicubic)
                                  .align_corners(false)
                                  .antialias(true));
  grid = grid.permute({0, 2, 3, 1}).reshape({1, new_grid * new_grid, dim}).to(src.scalar_type());
  return torch::cat({src.slice(1, 0, 1), grid}, 1);
}

}  // namespace shoplens::detail
