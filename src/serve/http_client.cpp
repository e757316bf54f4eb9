// cpp-httplib is compiled with Debian's build flags here too (src/CMakeLists.txt).
#include "shoplens/serve/http_client.h"

#include <httplib.h>
#include <strings.h>

namespace shoplens::serve {

std::string HttpReply::header(const std::string& name) const {
  for (const auto& [key, value] : headers)
    if (strcasecmp(key.c_str(), name.c_str()) == 0) return value;
  return "";
}

HttpReply http_request(const std::string& host, int port, const std::string& method, const std::string& path,
                       const std::string& body, const std::string& content_type, double timeout_s) {
  httplib::Client client(host, port);
  const auto timeout = std::chrono::duration<double>(timeout_s);
  client.set_connection_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  client.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  client.set_write_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  httplib::Result result =
      method == "GET"
          ? client.Get(path.c_str())
          : client.Post(path.c_str(), body, content_type.empty() ? "application/octet-stream" : content_type.c_str());
  HttpReply reply;
  if (!result) {
    reply.error = httplib::to_string(result.error());
    return reply;
  }
  reply.status = result->status;
  reply.body = result->body;
  for (const auto& [k, v] : result->headers) reply.headers.emplace(k, v);
  return reply;
}

}  // namespace shoplens::serve
