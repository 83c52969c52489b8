#include <cstdio>
int main() { std::puts("cactus: work in progress"); return 0; }
