# Included by _h2.pyx: the part of libnghttp2's API (nghttp2/nghttp2.h) the server session uses.

from libc.stdint cimport int32_t, uint8_t, uint32_t

cdef extern from "nghttp2/nghttp2.h":
    ctypedef struct nghttp2_session:
        pass
    ctypedef struct nghttp2_session_callbacks:
        pass
    ctypedef struct nghttp2_nv:
        uint8_t *name
        uint8_t *value
        size_t namelen
        size_t valuelen
        uint8_t flags
    ctypedef struct nghttp2_frame_hd:
        size_t length
        int32_t stream_id
        uint8_t type
        uint8_t flags
    ctypedef enum nghttp2_headers_category:
        NGHTTP2_HCAT_REQUEST
    ctypedef struct nghttp2_headers:
        nghttp2_frame_hd hd
        nghttp2_headers_category cat
    ctypedef union nghttp2_frame:
        nghttp2_frame_hd hd
        nghttp2_headers headers
    ctypedef union nghttp2_data_source:
        int fd
        void *ptr
    ctypedef ssize_t (*nghttp2_data_source_read_callback)(
        nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length,
        uint32_t *data_flags, nghttp2_data_source *source, void *user_data) noexcept
    ctypedef struct nghttp2_data_provider:
        nghttp2_data_source source
        nghttp2_data_source_read_callback read_callback
    ctypedef struct nghttp2_settings_entry:
        int32_t settings_id
        uint32_t value

    ctypedef int (*begin_headers_cb)(nghttp2_session *, const nghttp2_frame *, void *) noexcept
    ctypedef int (*header_cb)(nghttp2_session *, const nghttp2_frame *, const uint8_t *, size_t,
                              const uint8_t *, size_t, uint8_t, void *) noexcept
    ctypedef int (*frame_recv_cb)(nghttp2_session *, const nghttp2_frame *, void *) noexcept
    ctypedef int (*data_chunk_cb)(nghttp2_session *, uint8_t, int32_t, const uint8_t *, size_t,
                                  void *) noexcept
    ctypedef int (*stream_close_cb)(nghttp2_session *, int32_t, uint32_t, void *) noexcept

    int nghttp2_session_callbacks_new(nghttp2_session_callbacks **callbacks_ptr)
    void nghttp2_session_callbacks_del(nghttp2_session_callbacks *callbacks)
    void nghttp2_session_callbacks_set_on_begin_headers_callback(nghttp2_session_callbacks *, begin_headers_cb)
    void nghttp2_session_callbacks_set_on_header_callback(nghttp2_session_callbacks *, header_cb)
    void nghttp2_session_callbacks_set_on_frame_recv_callback(nghttp2_session_callbacks *, frame_recv_cb)
    void nghttp2_session_callbacks_set_on_data_chunk_recv_callback(nghttp2_session_callbacks *, data_chunk_cb)
    void nghttp2_session_callbacks_set_on_stream_close_callback(nghttp2_session_callbacks *, stream_close_cb)
    int nghttp2_session_server_new(nghttp2_session **session_ptr, const nghttp2_session_callbacks *callbacks,
                                   void *user_data)
    void nghttp2_session_del(nghttp2_session *session)
    int nghttp2_submit_settings(nghttp2_session *session, uint8_t flags, const nghttp2_settings_entry *iv,
                                size_t niv)
    int nghttp2_session_set_local_window_size(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                                              int32_t window_size)
    ssize_t nghttp2_session_mem_recv(nghttp2_session *session, const uint8_t *data, size_t inlen)
    ssize_t nghttp2_session_mem_send(nghttp2_session *session, const uint8_t **data_ptr)
    int nghttp2_submit_response(nghttp2_session *session, int32_t stream_id, const nghttp2_nv *nva,
                                size_t nvlen, const nghttp2_data_provider *data_prd)
    int nghttp2_submit_trailer(nghttp2_session *session, int32_t stream_id, const nghttp2_nv *nva, size_t nvlen)
    int nghttp2_session_resume_data(nghttp2_session *session, int32_t stream_id)
    int nghttp2_submit_rst_stream(nghttp2_session *session, uint8_t flags, int32_t stream_id, uint32_t error_code)
    int nghttp2_session_terminate_session(nghttp2_session *session, uint32_t error_code)
    int nghttp2_session_set_stream_user_data(nghttp2_session *session, int32_t stream_id, void *data)
    void *nghttp2_session_get_stream_user_data(nghttp2_session *session, int32_t stream_id)
    int nghttp2_session_want_read(nghttp2_session *session)
    int nghttp2_session_want_write(nghttp2_session *session)
    const char *nghttp2_strerror(int lib_error_code)

    enum:
        NGHTTP2_DATA
        NGHTTP2_HEADERS
        NGHTTP2_FLAG_NONE
        NGHTTP2_FLAG_END_STREAM
        NGHTTP2_FLAG_END_HEADERS
        NGHTTP2_ERR_DEFERRED
        NGHTTP2_ERR_CALLBACK_FAILURE
        NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE
        NGHTTP2_DATA_FLAG_EOF
        NGHTTP2_DATA_FLAG_NO_END_STREAM
        NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS
        NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE
        NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE
        NGHTTP2_NV_FLAG_NONE
        NGHTTP2_NO_ERROR
        NGHTTP2_PROTOCOL_ERROR
        NGHTTP2_INTERNAL_ERROR
        NGHTTP2_CANCEL
