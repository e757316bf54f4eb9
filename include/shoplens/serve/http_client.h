// A minimal blocking HTTP/1.1 client (cpp-httplib behind it) for the e2e tests and tools.
#pragma once

#include <map>
#include <string>

namespace shoplens::serve {

struct HttpReply {
  int status = 0;  // 0: no response (error says why)
  std::string body;
  std::multimap<std::string, std::string> headers;
  std::string error;
  std::string header(const std::string& name) const;
};

HttpReply http_request(const std::string& host, int port, const std::string& method, const std::string& path,
                       const std::string& body = "", const std::string& content_type = "", double timeout_s = 60);

}  // namespace shoplens::serve
